"""Dense retrieval: the query's embedding ranked in the collection's vector index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connections

from retrieval.models import Collection
from retrieval.services.core.databases import search_database
from retrieval.services.core.filters import Filters
from retrieval.services.indexes import index_for
from retrieval.services.indexes.base import (
    check_query_dimensions,
    check_search_options,
    vector_literal,
)
from retrieval.services.ingestion.collections import embedder_for
from retrieval.services.retrievers.base import BaseRetriever, check_top_k, load_results
from retrieval.services.types import RetrievalResult, ScoredChunk


class DenseRetriever(BaseRetriever):
    """Rank chunks by cosine similarity to the query's embedding, in the collection's index.

    The collection names its index (``Collection.index``): pgvector by default, or an
    external engine. ``ef_search``, ``exact_scan_limit`` and ``max_scan_tuples`` are
    search hints passed to the index (see :class:`~retrieval.services.indexes.pgvector.
    PgvectorIndex`); an index ignores those it does not know. Scores are cosine
    similarities (``1 - distance``); ``score_threshold`` drops results below it.
    """

    costly_prepare = True  # embedding the query

    def __init__(
        self,
        *,
        ef_search: int = 100,
        exact_scan_limit: int = 5000,
        score_threshold: float | None = None,
        max_scan_tuples: int = 20000,
    ) -> None:
        check_search_options(ef_search, exact_scan_limit)
        if score_threshold is not None and not -1.0 <= score_threshold <= 1.0:
            raise ValueError(f"score_threshold must be within [-1, 1], not {score_threshold!r}.")
        self.ef_search = ef_search
        self.exact_scan_limit = exact_scan_limit
        self.score_threshold = score_threshold
        self.max_scan_tuples = max_scan_tuples

    def prepare(self, query: str, *, collection: Collection):
        """Embed the query with the collection's embedder."""
        return embedder_for(collection).embed_query(query)

    def batches(self, collection: Collection) -> bool:
        """True when the collection's index ranks many query vectors in one request."""
        return index_for(collection).features.batch_queries

    def prepare_many(self, queries: Sequence[str], *, collection: Collection) -> list[Any]:
        """Embed every query in one embedder call (:meth:`BaseEmbedder.embed_queries`)."""
        return list(embedder_for(collection).embed_queries(list(queries)))

    def rank_many_prepared(
        self,
        prepared: Sequence[Any],
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[list[ScoredChunk]]:
        check_top_k(top_k)
        return self.rank_vectors(prepared, collection=collection, top_k=top_k, filters=filters)

    def _rank(
        self, vector, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        return self.rank_vector(vector, collection=collection, top_k=top_k, filters=filters)

    def _hints(self) -> dict[str, Any]:
        return {
            "ef_search": self.ef_search,
            "exact_scan_limit": self.exact_scan_limit,
            "max_scan_tuples": self.max_scan_tuples,
        }

    def rank_vector(
        self, vector, *, collection: Collection, top_k: int, filters: Filters | None = None
    ) -> list[ScoredChunk]:
        """Return the ids and similarities of the ``top_k`` chunks nearest to ``vector``."""
        return index_for(collection).rank(
            vector,
            collection=collection,
            top_k=top_k,
            filters=Filters.parse(filters),
            score_threshold=self.score_threshold,
            **self._hints(),
        )

    def rank_vectors(
        self,
        vectors: Sequence[Any],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
    ) -> list[list[ScoredChunk]]:
        """:meth:`rank_vector` for each vector, in one request where the index batches."""
        return index_for(collection).rank_many(
            list(vectors),
            collection=collection,
            top_k=top_k,
            filters=Filters.parse(filters),
            score_threshold=self.score_threshold,
            **self._hints(),
        )

    def score_chunks(
        self, vector, chunk_ids: Sequence[int], *, collection: Collection
    ) -> dict[int, float]:
        """Return the cosine similarities of the given chunks to ``vector``.

        Computed from the vectors PostgreSQL keeps, whatever the collection's index; a
        chunk without a vector, or below ``score_threshold``, is left out.
        """
        if not chunk_ids:
            return {}
        check_query_dimensions(vector, collection)
        similarity = f"1 - ((c.embedding::vector({int(collection.dimensions)})) <=> %s::vector)"
        with connections[search_database()].cursor() as cursor:
            cursor.execute(
                f"SELECT c.id, {similarity} FROM retrieval_chunk c "
                "WHERE c.collection_id = %s AND c.id = ANY(%s) AND c.embedding IS NOT NULL",
                [vector_literal(vector), collection.pk, list(chunk_ids)],
            )
            scores = {chunk_id: float(score) for chunk_id, score in cursor.fetchall()}
        if self.score_threshold is None:
            return scores
        return {i: score for i, score in scores.items() if score >= self.score_threshold}

    def search_vector(
        self, vector, *, collection: Collection, top_k: int, filters: Filters | None = None
    ) -> list[RetrievalResult]:
        """Return the ``top_k`` chunks nearest to an already computed query vector."""
        return load_results(
            self.rank_vector(vector, collection=collection, top_k=top_k, filters=filters),
            filters=filters,
        )

    def explain(
        self, vector, *, collection: Collection, top_k: int, filters: Filters | None = None
    ) -> str:
        """Return the index's plan for :meth:`rank_vector`'s query (pgvector: EXPLAIN)."""
        index = index_for(collection)
        explain = getattr(index, "explain", None)
        if explain is None:
            return f"{type(index).__name__} ({index.alias}) gives no plan."
        return explain(
            vector,
            collection=collection,
            top_k=top_k,
            filters=Filters.parse(filters),
            score_threshold=self.score_threshold,
            **self._hints(),
        )


#: The name sites configured before indexes existed; the same retriever.
PgvectorRetriever = DenseRetriever
