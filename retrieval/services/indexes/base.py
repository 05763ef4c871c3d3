"""The vector index interface: where a collection's chunk vectors are ranked.

PostgreSQL keeps every chunk and its vector (``Chunk.embedding``); an index ranks
chunk ids by similarity to a query vector. The pgvector index ranks them in the
same database (``transactional``: its writes commit with the chunks'). An external
engine holds a copy, written from the outbox after the chunk writes commit, and
so may lag: retrievers load chunks from PostgreSQL and drop ids that are gone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

from retrieval.exceptions import DimensionMismatchError
from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.types import ScoredChunk

#: One vector to store: (chunk id, document id, chunk metadata, vector).
VectorRow = tuple[int, int, dict[str, Any], Sequence[float]]


class BaseIndex(ABC):
    """Store and rank chunk vectors, one space per collection.

    Capability flags: ``transactional`` (writes commit with PostgreSQL's, no
    outbox needed), ``supports_filters`` (ranks under :class:`Filters` itself,
    exactly), ``supports_sparse`` (can also rank BM25; unused by this app so far).
    """

    alias: str = ""
    transactional: bool = False
    supports_filters: bool = True
    supports_sparse: bool = False

    def check(self) -> list:
        """Return Django check messages about this index's configuration."""
        return []

    def reset(self) -> None:  # noqa: B027 (optional hook: most indexes hold no connection)
        """Forget connections after a failure, so the next call connects anew."""

    @abstractmethod
    def ensure_space(self, collection: Collection) -> None:
        """Create the collection's space (its dimensions and metric) if missing."""

    @abstractmethod
    def drop_space(self, collection_id: int) -> None:
        """Drop everything the index holds for a collection (which may be gone)."""

    @abstractmethod
    def write(self, collection: Collection, rows: Iterable[VectorRow]) -> None:
        """Store (or replace) the vectors of chunk ids; writing one twice is harmless."""

    @abstractmethod
    def delete(self, collection: Collection, chunk_ids: Sequence[int]) -> None:
        """Remove chunk ids; ids the index does not hold are ignored."""

    @abstractmethod
    def rank(
        self,
        vector: Sequence[float],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
        score_threshold: float | None = None,
        **hints: Any,
    ) -> list[ScoredChunk]:
        """Return the ``top_k`` chunk ids nearest to ``vector`` (cosine similarity), best first.

        ``hints`` are engine-specific search parameters (e.g. ``ef_search``); an
        index ignores those it does not know.
        """

    @abstractmethod
    def ids(self, collection: Collection) -> set[int]:
        """Return the chunk ids the index holds for ``collection``."""

    def count(self, collection: Collection) -> int:
        """Return how many chunk vectors the index holds for ``collection``."""
        return len(self.ids(collection))

    @abstractmethod
    def swap_space(self, collection: Collection) -> None:
        """Prepare the move of the collection to a new embedding space.

        Called inside the re-embedding's transaction, with the collection row locked,
        just before ``embedding_next`` moves into ``embedding`` and the new embedder
        and dimensions are saved: the index switches to the new vectors when (or
        once) that transaction commits.
        """

    @abstractmethod
    def rebuild(self, collection: Collection) -> None:
        """Build the collection's space anew from PostgreSQL's vectors, then switch to it."""


def check_query_dimensions(vector: Sequence[float], collection: Collection) -> None:
    """Refuse a query vector whose length is not the collection's dimensions."""
    if len(vector) != collection.dimensions:
        raise DimensionMismatchError(
            f"Query vector has {len(vector)} dimensions; collection {collection.name!r} "
            f"holds {collection.dimensions}."
        )
