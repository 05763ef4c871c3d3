"""The hybrid's fusion settings, swept offline over its legs' rankings, on three sets.

    python bench/fusion.py [--datasets scifact cranfield flask]

Each query is ranked once by each leg of the default hybrid (``bm25`` and ``dense``,
100 candidates each, through ``run_legs`` as ``HybridRetriever`` ranks them); every
setting of :data:`SETTINGS` then fuses those lists with the library's own fusion
(``LegResults.fuse``), so a row is what the hybrid with that setting answers. A
setting with fewer ``candidates`` fuses each list's best only (with
``dense_candidates``, the dense list's alone), as a hybrid asking its legs for fewer
does at ``top_k`` 10 (its R@100 is that of those lists' fused top 100, not what such a
hybrid answers at ``top_k`` 100, which ranks 100 per leg).
SciFact train and Cranfield are ``context.py``'s ``bench-context-<name>-on``
collections (one chunk per document, the default ``CHUNK_CONTEXT``), scored by
nDCG@10 / Recall@100; Flask's docs are ``realdocs.py``'s default configuration,
scored by its document-level hit@5 / MRR@10. On each set the configured hybrid also
answers every query, and its chunk ids and figures are compared with its setting's
offline fusion. Prints one Markdown table, a row per setting, then the settings that
gain on every BEIR-format set and lose at most 0.01 MRR@10 on Flask, with 95% paired
bootstrap intervals of their gains over :data:`DEFAULT`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import realdocs
from common import beir_sources, run_over_datasets, table
from context import EMBEDDERS, context_collection

from retrieval.services.types import ScoredChunk

if TYPE_CHECKING:
    from retrieval.models import Collection
    from retrieval.services.core.legs import LegResults


@dataclass(frozen=True)
class Fusion:
    """One hybrid fusion: the method, the dense leg's weight (BM25's is 1), RRF's k and
    how many candidates each leg gives (the dense leg fewer, if ``dense_candidates``);
    the legs in ``zero_floor`` are scaled by their best score alone under relative-score
    fusion (as if each list ended with a score of 0), not min-max; ``document_floor`` is
    the hybrid's option of that name."""

    method: str
    dense: float = 1.0
    k: int = 60
    candidates: int = 100
    dense_candidates: int | None = None
    zero_floor: tuple[str, ...] = ()
    document_floor: float = 0.0

    @property
    def label(self) -> str:
        name = f"rrf k={self.k}" if self.method == "rrf" else self.method.replace("_", " ")
        depth = f", {self.candidates} candidates" if self.candidates != 100 else ""
        if self.dense_candidates is not None:
            depth += f", dense leg {self.dense_candidates} candidates"
        if self.zero_floor:
            depth += f", {' and '.join(self.zero_floor)} floor 0"
        if self.document_floor:
            depth += f", document floor {self.document_floor:g}"
        return f"{name}, dense {self.dense:g}{depth}" + (" (default)" if self == DEFAULT else "")

    def fuse(self, legs: LegResults, top_k: int) -> list[ScoredChunk]:
        """Fuse the legs' lists as a HybridRetriever with this setting does."""
        weights = {name: self.dense if name == "dense" else 1.0 for name in legs.ranked}
        ranked = {name: results[: self.depth(name)] for name, results in legs.ranked.items()}
        # A floor of 0: the list ends with a score of 0 for a chunk id no chunk has (-1),
        # which min-max then maps to 0; it is dropped from the fused list.
        for name in self.zero_floor:
            ranked[name] = [*ranked[name], ScoredChunk(-1, 0.0)]
        fusing = replace(legs, weights=weights, ranked=ranked)
        fused = fusing.fuse(
            self.method,
            k=self.k,
            top_k=top_k + len(self.zero_floor),
            document_floor=self.document_floor,
        )
        return [s for s in fused if s.chunk_id != -1][:top_k]

    def depth(self, leg: str) -> int:
        """How many of ``leg``'s candidates this setting fuses."""
        if leg == "dense" and self.dense_candidates is not None:
            return self.dense_candidates
        return self.candidates


#: The library's default hybrid (relative score, equal weights; RRF k=60 before this
#: bench): the baseline of the gains.
DEFAULT = Fusion("relative_score", document_floor=0.8)
WEIGHTS = (0.8, 1.0, 1.25, 1.5)
SETTINGS = [
    *(Fusion("rrf", dense, k) for k in (1, 5, 10, 20, 30, 60) for dense in WEIGHTS),
    *(Fusion(method, dense) for method in ("relative_score", "dbsf") for dense in WEIGHTS),
    *(Fusion("relative_score", document_floor=floor) for floor in (0.5, 0.8, 0.9)),
    *(Fusion("relative_score", candidates=depth) for depth in (50, 30, 20)),
    *(Fusion("relative_score", dense_candidates=depth) for depth in (50, 30, 20)),
    *(Fusion("relative_score", zero_floor=legs) for legs in (("bm25",), ("bm25", "dense"))),
    *(
        Fusion("relative_to_best", dense, candidates=depth)
        for depth in (100, 20)
        for dense in (*WEIGHTS, 2.0)
    ),
]
LEGS_ALONE = ("bm25", "dense")


@dataclass(frozen=True)
class Column:
    """One set's column: each row's cell, and its main figure (nDCG@10 or reciprocal rank)
    on each query."""

    header: str
    cells: dict[str, str]
    main: dict[str, list[float]]
    beir: bool  # a BEIR-format set (to gain on), or real documents (not to lose on)

    def gain(self, row: str) -> tuple[float, float, float]:
        """Return the row's mean gain over the default's, and a 95% paired bootstrap interval."""
        differences = np.subtract(self.main[row], self.main[DEFAULT.label])
        samples = np.random.default_rng(0).integers(0, len(differences), (2000, len(differences)))
        low, high = np.percentile(differences[samples].mean(axis=1), [2.5, 97.5])
        return float(differences.mean()), float(low), float(high)


def main() -> None:
    columns = run_over_datasets(__doc__, run_dataset, more=["flask"])
    rows = [f"{leg} alone" for leg in LEGS_ALONE] + [s.label for s in SETTINGS]
    print(table(["setting", *(c.header for c in columns)], [
        [row, *(c.cells[row] for c in columns)] for row in rows
    ]))  # fmt: skip
    print(
        "\nSettings that gain on every BEIR-format set and lose at most 0.01 MRR@10 (about one"
        "\nquestion) on Flask, largest mean BEIR-format gain first: gains in nDCG@10 (Flask:"
        "\nMRR@10) over the default, with 95% paired bootstrap intervals over the queries."
    )
    kept = []
    for fusion in SETTINGS:
        gains = [c.gain(fusion.label) for c in columns]
        beir = [g[0] for c, g in zip(columns, gains, strict=True) if c.beir]
        flask = [g[0] for c, g in zip(columns, gains, strict=True) if not c.beir]
        if all(g > 0 for g in beir) and all(g >= -0.01 for g in flask):
            kept.append((sum(beir) / max(len(beir), 1), fusion.label, gains))
    for mean, label, gains in sorted(kept, reverse=True):
        print(f"- {label} (mean {mean:+.4f}): " + ", ".join(
            f"{c.header.split()[0]} {g:+.4f} [{low:+.4f}, {high:+.4f}]"
            for c, (g, low, high) in zip(columns, gains, strict=True)
        ))  # fmt: skip


def run_dataset(name: str) -> Column:
    started = time.perf_counter()
    column = flask_column() if name == "flask" else beir_column(name)
    print(f"{name}: {time.perf_counter() - started:.0f} s in all\n")
    return column


def beir_column(name: str) -> Column:
    """Sweep a BEIR-format training set over ``context.py``'s collection of it."""
    from django.test.utils import override_settings

    from retrieval.services.quality.evaluation import METRICS, document_ranking, score_run

    split, dataset, sources = beir_sources(name)
    queries = dataset.judged_queries()
    print(f"## {name} ({split}): {len(sources)} documents, {len(queries)} queries")
    collection = context_collection(name, sources)

    def score(rankings: list[list[str]]) -> tuple[str, list[float]]:
        run = dict(zip(queries, rankings, strict=True))
        figures = score_run(run, dataset.qrels)
        ndcg = [METRICS["ndcg@10"](run[q], dataset.qrels[q]) for q in queries]
        return f"{figures['ndcg@10']:.4f} / {figures['recall@100']:.4f}", ndcg

    with override_settings(RETRIEVAL={"EMBEDDERS": EMBEDDERS}):
        column = sweep(collection, list(queries.values()), 100, document_ranking, score)
    return Column(f"{name} {split} nDCG@10 / R@100", *column, beir=True)


def flask_column() -> Column:
    """Sweep Flask's docs, indexed as ``realdocs.py``'s default configuration."""
    from django.test.utils import override_settings

    questions = realdocs.load_questions()
    print(f"## flask: {len(questions)} questions")

    def score(rankings: list[list[str]]) -> tuple[str, list[float]]:
        hits, mrr = realdocs.hits_and_mrr(rankings, questions)
        reciprocal = [
            realdocs.reciprocal_rank(ranking, question["files"])
            for ranking, question in zip(rankings, questions, strict=True)
        ]
        return f"{hits} / {mrr:.3f}", reciprocal

    with override_settings(RETRIEVAL=realdocs.app_settings("default")):
        collection = realdocs.ingest_app("default", realdocs.documents_folder())
        texts = [q["question"] for q in questions]
        column = sweep(collection, texts, realdocs.DEPTH, realdocs.file_ranking, score)
    return Column("Flask hit@5 / MRR@10", *column, beir=False)


def sweep(
    collection: Collection,
    queries: list[str],
    top_k: int,
    documents: Callable[[Iterable[str]], list[str]],
    score: Callable[[list[list[str]]], tuple[str, list[float]]],
) -> tuple[dict[str, str], dict[str, list[float]]]:
    """Rank the legs once per query, fuse them with every setting, check the default.

    ``documents`` turns a chunk ranking's external ids into the ranking scored;
    ``score`` turns every query's ranking into a cell and each query's main figure.
    Return each row's cell and main figures.
    """
    from retrieval.models import Chunk
    from retrieval.services.access import Scope
    from retrieval.services.core.legs import Leg, run_legs
    from retrieval.services.query.search import search
    from retrieval.services.registry import retrievers

    external_ids = dict(
        Chunk.objects.filter(collection=collection).values_list("pk", "document__external_id")
    )

    def ranking(chunk_ids: Iterable[int]) -> list[str]:
        return documents(external_ids[chunk_id] for chunk_id in chunk_ids)

    # As HybridRetriever._rank does for the default hybrid: its legs, weights and depth.
    hybrid = retrievers["hybrid"]
    started = time.perf_counter()
    legs = [
        run_legs(
            [Leg(alias, retrievers[alias], query, weight) for alias, weight in hybrid.legs.items()],
            collection=collection,
            top_k=max(hybrid.candidates, top_k),
            filters=Scope.ALL.filters(),
            label="hybrid",
        )
        for query in queries
    ]
    failed = [results.failed for results in legs if results.failed]
    if failed:  # the hybrid would answer with one leg: not the fusion measured
        raise SystemExit(f"{len(failed)} queries lost a leg, e.g. {failed[0]}")
    print(f"legs ranked in {time.perf_counter() - started:.0f} s")

    started = time.perf_counter()
    cells, main = {}, {}
    for leg in LEGS_ALONE:
        cells[f"{leg} alone"], main[f"{leg} alone"] = score(
            [ranking(s.chunk_id for s in results.ranked[leg][:top_k]) for results in legs]
        )
    for fusion in SETTINGS:
        fused = [ranking(s.chunk_id for s in fusion.fuse(results, top_k)) for results in legs]
        cells[fusion.label], main[fusion.label] = score(fused)
    print(f"{len(SETTINGS)} settings fused in {time.perf_counter() - started:.0f} s")

    # The configured hybrid (DEFAULT, unless the site changed it) fused offline, and as it answers.
    started = time.perf_counter()
    configured = Fusion(
        hybrid.method,
        hybrid.legs["dense"] / hybrid.legs["bm25"],
        hybrid.k,
        max(hybrid.candidates, top_k),
        document_floor=hybrid.document_floor,
    )
    offline = [[s.chunk_id for s in configured.fuse(results, top_k)] for results in legs]
    real = [
        [r.chunk_id for r in search(query, collection=collection, retriever="hybrid",
                                    top_k=top_k, scope=Scope.ALL)]
        for query in queries
    ]  # fmt: skip
    same = sum(a == b for a, b in zip(offline, real, strict=True))
    figures = [score([ranking(ids) for ids in run])[0] for run in (offline, real)]
    print(
        f"Check, {configured.label}: offline {figures[0]}, HybridRetriever {figures[1]}; "
        f"the same chunk ids on {same} of {len(queries)} queries "
        f"({time.perf_counter() - started:.0f} s)"
    )
    return cells, main


if __name__ == "__main__":
    main()
