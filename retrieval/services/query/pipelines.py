"""Named retrieval pipelines: rewrite → retrievers → fusion → rerank.

Configured in ``RETRIEVAL["PIPELINES"]``; each step names a configured component::

    "PIPELINES": {
        "default": {},                       # the collection's default retriever
        "careful": {
            "rewriter": "prf",               # REWRITERS alias (optional)
            "retrievers": {"hybrid": 1.0},   # RETRIEVERS aliases and fusion weights
            "fusion": "rrf", "k": 60,        # how lists are fused (default: RETRIEVAL["FUSION"])
            "document_floor": 0.8,           # a document's leader: this share of its best, per list
            "reranker": "cross",             # RERANKERS alias (optional)
            "candidates": 50,                # results per list, and reranked
        },
    }

Each (query, retriever) pair is a leg of :func:`retrieval.services.core.legs.run_legs`, the
runner :class:`HybridRetriever` uses too: legs are prepared concurrently, a failing leg is
recorded while the others answer, and the lists are fused the same way.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.core import checks

from retrieval.conf import retrieval_settings
from retrieval.exceptions import InvalidComponentError
from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.core.fusion import fusion_defaults
from retrieval.services.core.legs import Leg, LegResults, run_legs
from retrieval.services.core.tracing import current_trace
from retrieval.services.registry import rerankers, retrievers, rewriters
from retrieval.services.retrievers.base import check_top_k, load_results
from retrieval.services.rewriters.base import Turn
from retrieval.services.types import RetrievalResult

STEPS = ("rewriter", "retrievers", "fusion", "k", "document_floor", "reranker", "candidates")


def retriever_alias(collection: Collection, retriever: str | None = None) -> str:
    """Return the retriever to use: the one asked for, the collection's, or the default."""
    return retriever or collection.default_retriever or retrieval_settings.DEFAULT_RETRIEVER


class Pipeline:
    """One configured pipeline. ``retrievers=None`` means the collection's default retriever."""

    def __init__(
        self,
        *,
        name: str = "",
        rewriter: str | None = None,
        retrievers: Mapping[str, float] | Sequence[str] | None = None,
        fusion: str | None = None,
        k: int | None = None,
        document_floor: float | None = None,
        reranker: str | None = None,
        candidates: int = 50,
    ) -> None:
        legs = retrievers
        if legs is not None and not isinstance(legs, Mapping):
            legs = dict.fromkeys(legs, 1.0)
        if legs is not None and not legs:
            raise ValueError("retrievers must name at least one retriever (or be left out).")
        fusion, k, document_floor = fusion_defaults(fusion, k, document_floor)
        if not isinstance(candidates, int) or candidates < 1:
            raise ValueError(f"candidates must be a positive integer, not {candidates!r}.")
        self.name = name
        self.rewriter = rewriter
        self.legs = None if legs is None else {alias: float(w) for alias, w in legs.items()}
        self.fusion = fusion
        self.k = k
        self.document_floor = document_floor
        self.reranker = reranker
        self.candidates = candidates

    @classmethod
    def configured(cls, name: str) -> Pipeline:
        """Return the pipeline ``name`` of ``RETRIEVAL["PIPELINES"]``."""
        configs = retrieval_settings.PIPELINES
        if name not in configs:
            raise InvalidComponentError(
                f"Unknown pipeline {name!r}; configured: {', '.join(sorted(configs)) or '(none)'}."
            )
        config = dict(configs[name])
        unknown = sorted(set(config) - set(STEPS))
        if unknown:
            raise InvalidComponentError(
                f"RETRIEVAL['PIPELINES'][{name!r}] has unknown keys {', '.join(unknown)}; "
                f"steps are {', '.join(STEPS)}."
            )
        try:
            return cls(name=name, **config)
        except (TypeError, ValueError) as e:
            raise InvalidComponentError(f"RETRIEVAL['PIPELINES'][{name!r}]: {e}") from e

    def check(self) -> list[checks.CheckMessage]:
        """Return an error for each step naming a component that is not configured."""
        steps = [("REWRITERS", self.rewriter, rewriters), ("RERANKERS", self.reranker, rerankers)]
        steps += [("RETRIEVERS", alias, retrievers) for alias in self.legs or ()]
        return [
            checks.Error(
                f"Pipeline {self.name!r} uses {alias!r}, which is not in RETRIEVAL[{kind!r}].",
                hint=f"Configured: {', '.join(handler.aliases()) or '(none)'}.",
                id="retrieval.E008",
            )
            for kind, alias, handler in steps
            if alias is not None and alias not in handler
        ]

    def run(
        self,
        query: str,
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
        history: Sequence[Turn] | None = None,
    ) -> list[RetrievalResult]:
        """Return the pipeline's ``top_k`` results for ``query``."""
        check_top_k(top_k)
        filters = Filters.parse(filters)
        queries: tuple[str, ...] = (query,)
        asked = query
        if self.rewriter is not None:
            rewrite = rewriters[self.rewriter].rewrite(
                query, collection=collection, history=history, filters=filters
            )
            queries, asked = rewrite.queries, rewrite.asked
        legs = self.legs or {retriever_alias(collection): 1.0}
        fused = len(queries) * len(legs) > 1
        depth = max(self.candidates, top_k) if fused or self.reranker else top_k
        runs = [
            Leg(f"{alias}:q{number}" if len(queries) > 1 else alias, retrievers[alias], text, w)
            for number, text in enumerate(queries)
            for alias, w in legs.items()
        ]
        inner = _fused_legs(runs, depth)
        answered = run_legs(
            [leg for run in runs for leg in inner.get(run.name, [run])],
            collection=collection,
            top_k=depth,
            filters=filters,
            label=f"pipeline {self.name!r}" if self.name else "pipeline",
        )
        lists = _fuse_inner(runs, inner, answered, depth)
        if fused:
            ranking = lists.fuse(
                self.fusion, k=self.k, top_k=depth, document_floor=self.document_floor
            )
        else:  # a lone leg raises its own error; its scores brought into [0, 1]
            ranking = runs[0].retriever.normalise(lists.ranked[runs[0].name])
        results = load_results(ranking, filters=filters)
        if self.reranker is not None:
            # The whole question (a standalone rewrite, else the turn): never a sub-question
            # or a hypothetical passage, which would judge by a part or by an invented answer.
            results = rerankers[self.reranker].rerank(asked, results, top_k=top_k)
        trace = current_trace()
        if trace is not None:
            trace.record(
                "pipeline",
                pipeline=self.name,
                queries=list(queries),
                retrievers=list(legs),
                fused_lists=len(answered.ranked) if fused or inner else 0,
                failed_legs=dict(answered.failed),
                reranker=self.reranker,
                leg_ms=dict(answered.ms),
                candidates={
                    name: [[item.chunk_id, item.score] for item in ranked[:100]]
                    for name, ranked in answered.ranked.items()
                },
            )
        return results[:top_k]

    def batched_retriever(self, collection: Collection) -> str | None:
        """Return the retriever alias that alone answers this pipeline when a batch of its
        queries is answered in one request (one embedding call, one engine request): no
        rewriter, no reranker, one leg whose retriever batches on the collection's index."""
        if self.rewriter is not None or self.reranker is not None:
            return None
        legs = self.legs or {retriever_alias(collection): 1.0}
        if len(legs) != 1:
            return None
        alias = next(iter(legs))
        return alias if retrievers[alias].batches(collection) else None

    def run_many(
        self,
        queries: Sequence[str],
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[list[RetrievalResult]]:
        """Return :meth:`run`'s results for each query: the whole batch prepared and
        ranked at once when :meth:`batched_retriever` names a retriever, else one by one."""
        alias = self.batched_retriever(collection)
        if alias is None:
            return [
                self.run(query, collection=collection, top_k=top_k, filters=filters)
                for query in queries
            ]
        check_top_k(top_k)
        filters = Filters.parse(filters)
        retriever = retrievers[alias]
        started = time.perf_counter()
        prepared = retriever.prepare_many(list(queries), collection=collection)
        rankings = retriever.rank_many_prepared(
            prepared, collection=collection, top_k=top_k, filters=filters
        )
        ms = round((time.perf_counter() - started) * 1000, 2)
        trace = current_trace()
        if trace is not None:
            trace.record(
                "pipeline",
                pipeline=self.name,
                queries=list(queries),
                retrievers=[alias],
                batched=True,
                fused_lists=0,
                failed_legs={},
                reranker=None,
                leg_ms={alias: ms},
                candidates={
                    f"{alias}:q{number}": [[item.chunk_id, item.score] for item in ranked[:100]]
                    for number, ranked in enumerate(rankings)
                },
            )
        return [
            load_results(retriever.normalise(ranking), filters=filters)[:top_k]
            for ranking in rankings
        ]


def _fused_legs(runs: list[Leg], depth: int) -> dict[str, list[Leg]]:
    """The legs of each run whose retriever fuses legs (a hybrid), to run beside the others.

    Named as the fused retrievers when the run is the only one (``bm25``, ``dense``), else
    after the run (``hybrid:q1/bm25``), so that names stay distinct.
    """
    inner = {}
    for run in runs:
        legs = run.retriever.fused_legs(run.query, top_k=depth)
        if legs is not None:
            prefix = f"{run.name}/" if len(runs) > 1 else ""
            inner[run.name] = [replace(leg, name=prefix + leg.name) for leg in legs]
    return inner


def _fuse_inner(
    runs: list[Leg], inner: dict[str, list[Leg]], answered: LegResults, depth: int
) -> LegResults:
    """``answered`` with each fusing run's legs fused into that run's one list.

    A run all of whose legs failed is a failed run, as when it ran its legs itself (some
    run answered: :func:`run_legs` raises when every leg fails).
    """
    if not inner:
        return answered
    ranked, failed = {}, dict(answered.failed)
    for run in runs:
        if run.name not in inner:
            if run.name in answered.ranked:
                ranked[run.name] = answered.ranked[run.name]
            continue
        part = answered.subset([leg.name for leg in inner[run.name]])
        if part.ranked:
            ranked[run.name] = run.retriever.fuse_legs(part, top_k=depth)
        else:
            failed[run.name] = "; ".join(f"{name}: {why}" for name, why in part.failed.items())
    return LegResults(
        ranked,
        {name: next(r.weight for r in runs if r.name == name) for name in ranked},
        failed,
        {name: answered.ms.get(name, 0.0) for name in ranked},
        {run.name: run for run in runs if run.name in ranked},
        {name: answered.prepared[name] for name in ranked if name in answered.prepared},
        answered.collection,
    )


def check_pipelines() -> list[checks.CheckMessage]:
    """Check every configured pipeline and ``DEFAULT_PIPELINE``."""
    errors: list[checks.CheckMessage] = []
    for name in sorted(retrieval_settings.PIPELINES):
        try:
            errors += Pipeline.configured(name).check()
        except InvalidComponentError as e:
            errors.append(checks.Error(str(e), id="retrieval.E008"))
    return errors
