"""The retriever interface: a query -> ranked :class:`RetrievalResult` records."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.types import RetrievalResult


class BaseRetriever(ABC):
    """Rank a collection's chunks for a query.

    Every retriever applies the collection scope and :class:`Filters` the same way;
    results are sorted by descending score with 0-based ``rank``.
    """

    alias: str = ""
    supports_filters: bool = True

    def retrieve(
        self,
        query: str,
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[RetrievalResult]:
        """Return at most ``top_k`` results for ``query`` in ``collection``."""
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be a positive integer, not {top_k!r}.")
        return self._retrieve(
            query, collection=collection, top_k=top_k, filters=Filters.parse(filters)
        )

    @abstractmethod
    def _retrieve(
        self, query: str, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[RetrievalResult]:
        """Rank chunks; arguments are already validated."""

    def check(self) -> list:
        """Return Django check messages about this retriever's configuration."""
        return []
