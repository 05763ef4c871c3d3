"""The reranker interface."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace

from retrieval.services.core.tracing import current_trace
from retrieval.services.types import RetrievalResult


class BaseReranker(ABC):
    """Reorder results for a query; each keeps its previous score as ``original_score``.

    A reranked score lies in [0, 1]: the reranker's own when all its scores do, else
    its scores min-max normalised over the candidates (the same order), the reranker's
    kept as ``metadata["raw_score"]``.
    """

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
        raw, details = self._scores(query, list(results))
        scores = within_0_1(raw)
        order = sorted(range(len(results)), key=lambda i: (-scores[i], i))
        reranked = [
            replace(
                results[i],
                score=scores[i],
                rank=rank,
                metadata={
                    **results[i].metadata,
                    "original_score": results[i].score,
                    "original_rank": results[i].rank,
                    "raw_score": float(raw[i]),
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

    def warm(self) -> None:  # noqa: B027 (optional hook)
        """Load now what the first rerank would load (a model), so no search waits for it."""

    def check(self) -> list:
        return []


def within_0_1(scores: list[float]) -> list[float]:
    """Return ``scores`` if they all lie in [0, 1], else min-max normalised (same order)."""
    values = [float(score) for score in scores]
    if all(0.0 <= value <= 1.0 for value in values):
        return values
    low, high = min(values), max(values)
    return [1.0 if high == low else (value - low) / (high - low) for value in values]
