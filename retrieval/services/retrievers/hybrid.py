"""Hybrid retrieval: run several retrievers concurrently and fuse their rankings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.core import checks

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.core.fusion import fusion_defaults
from retrieval.services.core.legs import Leg, LegResults, run_legs
from retrieval.services.registry import retrievers as retriever_registry
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.types import ScoredChunk


class HybridRetriever(BaseRetriever):
    """Fuse the rankings of named retrievers ("legs"), each with a weight.

    ``retrievers`` maps alias to weight (or lists aliases, all weighted 1).
    ``method`` is ``"relative_score"`` (each leg's scores min-max normalised, then a
    weighted sum; the default, chosen by ``bench/fusion.py``), ``"rrf"`` (weighted
    reciprocal-rank fusion with constant ``k``), ``"dbsf"`` (distribution-based
    score fusion) or ``"relative_to_best"`` (every candidate scored by every leg that
    can, each leg's scores divided by its best). ``document_floor`` (default
    ``RETRIEVAL["FUSION"]``'s, 0.8) gives each document's leading candidate, in each leg, at
    least that share of the leg's best score for a chunk of the document (0: chunks fused
    alone). Each leg returns ``candidates`` results (at least ``top_k``); only the fused top
    ``top_k`` chunks are loaded. Legs run
    through :func:`retrieval.services.core.legs.run_legs`, as a pipeline's do: prepared
    concurrently, ranked on the caller's connection (so they see its transaction's
    uncommitted writes; outside transactions, with Django's connection pool, the dense
    leg ranks on a second pooled connection beside BM25). A leg that fails is logged and
    named in each result's ``metadata["failed_legs"]``; only if all fail does the search
    raise.
    """

    def __init__(
        self,
        *,
        retrievers: Mapping[str, float] | Sequence[str] = ("bm25", "dense"),
        method: str | None = None,
        k: int | None = None,
        candidates: int = 100,
        document_floor: float | None = None,
    ) -> None:
        legs = (
            dict(retrievers) if isinstance(retrievers, Mapping) else dict.fromkeys(retrievers, 1.0)
        )
        if not legs:
            raise ValueError("retrievers must name at least one retriever.")
        if any(not isinstance(w, int | float) or w < 0 for w in legs.values()):
            raise ValueError(f"retriever weights must be non-negative numbers, not {legs!r}.")
        method, k, document_floor = fusion_defaults(method, k, document_floor)
        if candidates < 1:
            raise ValueError(f"candidates must be positive, not {candidates!r}.")
        self.legs = {alias: float(weight) for alias, weight in legs.items()}
        self.method = method
        self.k = k
        self.candidates = candidates
        self.document_floor = document_floor

    def check(self) -> list:
        errors = []
        for alias in self.legs:
            if alias == self.alias or alias not in retriever_registry:
                errors.append(
                    checks.Error(
                        f"Hybrid retriever {self.alias!r} fuses {alias!r}, which is "
                        + ("itself." if alias == self.alias else "not in RETRIEVERS."),
                        id="retrieval.E006",
                    )
                )
        return errors

    def fused_legs(self, query: str, *, top_k: int) -> list[Leg]:
        """One leg per fused retriever, each ranking ``candidates`` (at least ``top_k``)."""
        depth = max(self.candidates, top_k)
        return [
            Leg(alias, retriever_registry[alias], query, weight, top_k=depth)
            for alias, weight in self.legs.items()
        ]

    def fuse_legs(self, results: LegResults, *, top_k: int) -> list[ScoredChunk]:
        return results.fuse(self.method, k=self.k, top_k=top_k, document_floor=self.document_floor)

    def _rank(
        self, query: str, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        # Called alone (not through a pipeline, which runs these legs itself).
        legs = self.fused_legs(query, top_k=top_k)
        results = run_legs(
            legs, collection=collection, top_k=top_k, filters=filters, label="hybrid"
        )
        return self.fuse_legs(results, top_k=top_k)
