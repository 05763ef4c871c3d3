"""Rerank with any ``(query, text) -> float`` function."""

from __future__ import annotations

from collections.abc import Callable

from django.utils.module_loading import import_string

from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult


class ScoreReranker(BaseReranker):
    """Score each result with ``function(query, text)``: a callable or its dotted path."""

    def __init__(
        self, *, function: Callable[[str, str], float] | str, top_k: int | None = None
    ) -> None:
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
        ):
            raise ValueError(f"top_k must be a positive integer or None, not {top_k!r}.")
        self.top_k = top_k
        if isinstance(function, str):
            try:
                function = import_string(function)
            except ImportError as e:
                raise ValueError(f"cannot import the score function {function!r}: {e}") from e
        if not callable(function):
            raise ValueError(f"function must be callable, not {function!r}.")
        self.function = function

    def _scores(
        self, query: str, results: list[RetrievalResult]
    ) -> tuple[list[float], dict[str, object]]:
        return [float(self.function(query, r.chunk.content)) for r in results], {}
