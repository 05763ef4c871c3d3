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
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from retrieval.exceptions import DimensionMismatchError, InvalidFilterError
from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.types import ScoredChunk

#: One vector to store: (chunk id, document id, chunk metadata, vector).
VectorRow = tuple[int, int, dict[str, Any], Sequence[float]]
#: The widest ``ef_search`` search hint: pgvector's widest ``hnsw.ef_search`` (a wider one
#: is an error of the search).
MAX_EF_SEARCH = 1000


@dataclass(frozen=True)
class IndexFeatures:
    """What an index can do: read by the code that uses it and by its conformance suite
    (``retrieval.testing``), never guessed from its class.

    The filter fields say which metadata values the index compares: objects (nested
    keys), lists (of scalars; of anything only with objects and nulls too) and null.
    A filter it cannot express raises ``InvalidFilterError``: it is never dropped.
    """

    #: Writes commit with PostgreSQL's (no outbox, nothing can drift).
    transactional: bool = False
    filter_objects: bool = True
    filter_lists: bool = True
    filter_nulls: bool = True
    #: Ranks many query vectors in one request (:meth:`BaseIndex.rank_many`).
    batch_queries: bool = False

    def unsupported(self, value: Any) -> str | None:
        """Return what kind of metadata value this index cannot compare, or None."""
        if value is None:
            return None if self.filter_nulls else "a null"
        if isinstance(value, dict):
            if not self.filter_objects:
                return "an object"
            return next(filter(None, map(self.unsupported, value.values())), None)
        if isinstance(value, list | tuple):
            if not self.filter_lists:
                return "a list"
            compound = any(item is None or isinstance(item, dict | list) for item in value)
            if compound and not (self.filter_objects and self.filter_nulls):
                return "a list of objects or nulls"
        return None


class BaseIndex(ABC):
    """Store and rank chunk vectors, one space per collection; ``features`` says what it can."""

    alias: str = ""
    features: ClassVar[IndexFeatures] = IndexFeatures()

    def check_filters(self, filters: Filters) -> None:
        """Raise ``InvalidFilterError`` for a metadata filter this index cannot express."""
        for key, value in filters.metadata.items():
            kind = self.features.unsupported(value)
            if kind is not None:
                raise InvalidFilterError(
                    f"Index {self.alias!r} ({type(self).__name__}) cannot filter on metadata "
                    f"{key!r} = {value!r}: it does not compare {kind}. Use another value, or "
                    "a collection on the pgvector index."
                )

    def check(self) -> list:
        """Return Django check messages about this index's configuration."""
        return []

    def check_server(self) -> list:
        """Return Django check messages about the engine's server (reachable, a supported
        version); run by ``manage.py check --database ...``, never at import or startup."""
        return []

    def check_collection(self, collection: Collection) -> list:
        """Return Django check messages about the collection's space in the index (built as
        the index is configured); run by ``manage.py check --database ...``."""
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

    def await_visible(  # noqa: B027 (optional hook: most engines read their own writes)
        self, collection: Collection, *, written: Sequence[int], deleted: Sequence[int]
    ) -> None:
        """Return once searches see the vectors of ``written`` and none of ``deleted``.

        The outbox calls it after applying operations, before it forgets them: until
        then, searches rank those chunks in PostgreSQL. Raise if the engine does not
        show them (the operations are then retried). An engine whose searches see every
        acknowledged write has nothing to do.
        """

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

    def rank_many(
        self,
        vectors: Sequence[Sequence[float]],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
        score_threshold: float | None = None,
        **hints: Any,
    ) -> list[list[ScoredChunk]]:
        """Return :meth:`rank`'s answer for each vector, in order.

        One :meth:`rank` per vector here; an index whose engine takes many query
        vectors in one request overrides it and says so in ``features.batch_queries``.
        """
        return [
            self.rank(
                vector,
                collection=collection,
                top_k=top_k,
                filters=filters,
                score_threshold=score_threshold,
                **hints,
            )
            for vector in vectors
        ]

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


def vector_literal(vector: Sequence[float]) -> str:
    """Return pgvector's text form of ``vector`` (float32, as stored), as a query of the
    chunks' ``embedding`` column takes it, whichever index ranks them.

    Nine significant digits, the fewest that give every float32 back exactly: a third
    shorter than Python's float repr, and quicker to build and to parse.
    """
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ("%.9g," * len(values) % tuple(values))[:-1] + "]"


def check_search_options(ef_search: int, exact_scan_limit: int) -> None:
    """Refuse search hints that make no sense (the index's, and the dense retriever's,
    which passes them on to whichever index ranks)."""
    if not 1 <= ef_search <= MAX_EF_SEARCH:
        raise ValueError(
            f"ef_search must be between 1 and {MAX_EF_SEARCH} (pgvector's range), "
            f"not {ef_search!r}."
        )
    if exact_scan_limit < 0:
        raise ValueError(f"exact_scan_limit must be >= 0, not {exact_scan_limit!r}.")
