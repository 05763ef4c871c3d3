"""The reranker interface."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace

from retrieval.services.tracing import current_trace
from retrieval.services.types import RetrievalResult


class BaseReranker(ABC):
    """Reorder results for a query; each keeps its previous score as ``original_score``."""

    alias: str = ""
    #: How many results :meth:`rerank` keeps when the call does not say (None: all).
    top_k: int | None = None

    def rerank(
        self, query: str, results: Sequence[RetrievalResult], *, top_k: int | None = None
    ) -> list[RetrievalResult]:
        """Return ``results`` reordered for ``query`` (at most ``top_k``, else the
        reranker's own ``top_k``), ranks renumbered."""
        top_k = self.top_k if top_k is None else top_k
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
        ):
            raise ValueError(f"top_k must be a positive integer or None, not {top_k!r}.")
        if not results:
            return []
        started = time.monotonic()
        scores, details = self._scores(query, list(results))
        order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
        reranked = [
            replace(
                results[i],
                score=float(scores[i]),
                rank=rank,
                metadata={
                    **results[i].metadata,
                    "original_score": results[i].score,
                    "original_rank": results[i].rank,
                },
            )
            for rank, i in enumerate(order[:top_k])
        ]
        trace = current_trace()
        if trace is not None:
            trace.record(
                "rerank",
                reranker=self.alias or type(self).__name__,
                candidates=len(results),
                ms=round((time.monotonic() - started) * 1000, 2),
                **details,
            )
        return reranked

    @abstractmethod
    def _scores(
        self, query: str, results: list[RetrievalResult]
    ) -> tuple[list[float], dict[str, object]]:
        """Return a new score per result (higher is better) and details for the trace."""

    def check(self) -> list:
        return []
