"""Hybrid retrieval: run several retrievers concurrently and fuse their rankings."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from django.core import checks

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.fusion import FUSION_METHODS
from retrieval.services.registry import retrievers as retriever_registry
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.tracing import run_in_context
from retrieval.services.types import ScoredChunk

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="retrieval-leg")
        return _pool


class HybridRetriever(BaseRetriever):
    """Fuse the rankings of named retrievers ("legs"), each with a weight.

    ``retrievers`` maps alias to weight (or lists aliases, all weighted 1).
    ``method`` is ``"rrf"`` (weighted reciprocal-rank fusion with constant ``k``),
    ``"relative_score"`` (min-max normalised weighted sum) or ``"dbsf"``
    (distribution-based score fusion). Each leg returns ``candidates`` results
    (at least ``top_k``); only the fused top ``top_k`` chunks are loaded. The legs'
    database-free work (query embedding, analysis) runs concurrently on worker
    threads; their queries run on the caller's connection, so they see its
    transaction's uncommitted writes. A leg that fails is logged and
    named in each result's ``metadata["failed_legs"]``; only if all fail does the
    search raise.
    """

    def __init__(
        self,
        *,
        retrievers: Mapping[str, float] | Sequence[str] = ("bm25", "dense"),
        method: str = "rrf",
        k: int = 60,
        candidates: int = 100,
    ) -> None:
        legs = (
            dict(retrievers) if isinstance(retrievers, Mapping) else dict.fromkeys(retrievers, 1.0)
        )
        if not legs:
            raise ValueError("retrievers must name at least one retriever.")
        if any(not isinstance(w, int | float) or w < 0 for w in legs.values()):
            raise ValueError(f"retriever weights must be non-negative numbers, not {legs!r}.")
        if method not in FUSION_METHODS:
            raise ValueError(
                f"Unknown fusion method {method!r}; choose one of {', '.join(FUSION_METHODS)}."
            )
        if candidates < 1:
            raise ValueError(f"candidates must be positive, not {candidates!r}.")
        self.legs = {alias: float(weight) for alias, weight in legs.items()}
        self.method = method
        self.k = k
        self.candidates = candidates

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

    def _rank(
        self, query: str, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        depth = max(self.candidates, top_k)
        legs = {alias: retriever_registry[alias] for alias in self.legs}
        # Preparing a leg (embedding, analysis) needs no database: it runs on worker
        # threads, while this thread ranks each leg, on its own connection, as soon as
        # that leg is prepared (so BM25's SQL overlaps the query embedding).
        futures = {
            _executor().submit(run_in_context(leg.prepare), query, collection=collection): alias
            for alias, leg in legs.items()
        }
        ranked: dict[str, list[ScoredChunk]] = {}
        failed: dict[str, str] = {}
        for future in as_completed(futures):
            alias = futures[future]
            try:
                ranked[alias] = legs[alias].rank_prepared(
                    future.result(), collection=collection, top_k=depth, filters=filters
                )
            except Exception as e:
                logger.warning("Hybrid leg %r failed for %r: %s", alias, query, e, exc_info=True)
                failed[alias] = f"{e.__class__.__name__}: {e}"
        if not ranked:
            raise RetrievalError(
                "Every retriever of the hybrid failed: "
                + "; ".join(f"{alias}: {failed[alias]}" for alias in self.legs)
            )
        answered = [alias for alias in self.legs if alias in ranked]  # configuration order
        options: dict[str, Any] = {"k": self.k} if self.method == "rrf" else {}
        fused = FUSION_METHODS[self.method](
            [ranked[alias] for alias in answered],
            [self.legs[alias] for alias in answered],
            top_k=top_k,
            names=answered,
            **options,
        )
        if failed:
            for scored in fused:
                scored.metadata["failed_legs"] = failed
        return fused
