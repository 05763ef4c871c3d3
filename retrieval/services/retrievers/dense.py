"""Dense retrieval over pgvector: cosine distance, ranked inside PostgreSQL."""

from __future__ import annotations

import numpy as np
from django.db import connections, transaction

from retrieval.exceptions import DimensionMismatchError
from retrieval.models import Collection
from retrieval.services.collections import embedder_for
from retrieval.services.databases import search_database
from retrieval.services.filters import Filters
from retrieval.services.retrievers.base import BaseRetriever, load_results
from retrieval.services.types import RetrievalResult, ScoredChunk


class PgvectorRetriever(BaseRetriever):
    """Rank chunks by cosine similarity to the query's embedding.

    Unfiltered queries use the collection's HNSW index. Filtered ones still return
    ``top_k`` results whenever that many chunks match: a filter matching at most
    ``exact_scan_limit`` chunks is answered by an exact scan of those chunks, a
    wider one by pgvector's iterative index scan in strict order.
    Scores are cosine similarities (``1 - distance``).
    """

    def __init__(
        self,
        *,
        ef_search: int = 100,
        exact_scan_limit: int = 5000,
        score_threshold: float | None = None,
        max_scan_tuples: int = 20000,
    ) -> None:
        if ef_search < 1:
            raise ValueError(f"ef_search must be positive, not {ef_search!r}.")
        if exact_scan_limit < 0:
            raise ValueError(f"exact_scan_limit must be >= 0, not {exact_scan_limit!r}.")
        if score_threshold is not None and not -1.0 <= score_threshold <= 1.0:
            raise ValueError(f"score_threshold must be within [-1, 1], not {score_threshold!r}.")
        self.ef_search = ef_search
        self.exact_scan_limit = exact_scan_limit
        self.score_threshold = score_threshold
        self.max_scan_tuples = max_scan_tuples

    def prepare(self, query: str, *, collection: Collection):
        """Embed the query with the collection's embedder."""
        return embedder_for(collection).embed_query(query)

    def _rank(
        self, vector, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        return self.rank_vector(vector, collection=collection, top_k=top_k, filters=filters)

    def rank_vector(
        self, vector, *, collection: Collection, top_k: int, filters: Filters | None = None
    ) -> list[ScoredChunk]:
        """Return the ids and similarities of the ``top_k`` chunks nearest to ``vector``."""
        with (
            transaction.atomic(using=(alias := search_database())),
            connections[alias].cursor() as cursor,
        ):
            cursor.execute(*self._prepared_query(cursor, vector, collection, filters, top_k))
            rows = cursor.fetchall()
        return [ScoredChunk(chunk_id, 1.0 - float(distance)) for chunk_id, distance in rows]

    def search_vector(
        self, vector, *, collection: Collection, top_k: int, filters: Filters | None = None
    ) -> list[RetrievalResult]:
        """Return the ``top_k`` chunks nearest to an already computed query vector."""
        return load_results(
            self.rank_vector(vector, collection=collection, top_k=top_k, filters=filters)
        )

    def explain(
        self, vector, *, collection: Collection, top_k: int, filters: Filters | None = None
    ) -> str:
        """Return PostgreSQL's plan for the query :meth:`rank_vector` runs."""
        with (
            transaction.atomic(using=(alias := search_database())),
            connections[alias].cursor() as cursor,
        ):
            sql, params = self._prepared_query(cursor, vector, collection, filters, top_k)
            cursor.execute("EXPLAIN " + sql, params)
            return "\n".join(row[0] for row in cursor.fetchall())

    def _prepared_query(
        self, cursor, vector, collection: Collection, filters: Filters | None, top_k: int
    ) -> tuple[str, list]:
        """Set this transaction's planner options; return the ranking SQL and parameters.

        The cast matches the collection's partial HNSW index. A filter matching at most
        ``exact_scan_limit`` chunks is ranked by an exact scan of those chunks; a wider
        one walks the index iteratively, in strict order, until ``top_k`` match.
        """
        if len(vector) != collection.dimensions:
            raise DimensionMismatchError(
                f"Query vector has {len(vector)} dimensions; collection {collection.name!r} "
                f"holds {collection.dimensions}."
            )
        filter_conditions, filter_params = Filters.parse(filters).sql(
            "c", collection_id=collection.pk
        )
        where = " AND ".join(["c.collection_id = %s", *filter_conditions])
        where_params = [collection.pk, *filter_params]
        settings = {"hnsw.ef_search": str(max(self.ef_search, top_k))}
        if filter_conditions:
            cursor.execute(
                "SELECT count(*) FROM "
                f"(SELECT 1 FROM retrieval_chunk c WHERE {where} LIMIT %s) AS matching",
                [*where_params, self.exact_scan_limit + 1],
            )
            if cursor.fetchone()[0] <= self.exact_scan_limit:
                settings["enable_indexscan"] = "off"
            else:
                settings["hnsw.iterative_scan"] = "strict_order"
                settings["hnsw.max_scan_tuples"] = str(self.max_scan_tuples)
        calls = ", ".join("set_config(%s, %s, true)" for _ in settings)
        cursor.execute(f"SELECT {calls}", [x for item in settings.items() for x in item])
        distance = f"(c.embedding::vector({int(collection.dimensions)})) <=> %s::vector"
        literal = "[" + ",".join(map(str, np.asarray(vector, dtype=np.float32).tolist())) + "]"
        params = [literal, *where_params]
        if self.score_threshold is not None:
            where += f" AND {distance} <= %s"
            params += [literal, 1.0 - self.score_threshold]
        sql = (
            f"SELECT c.id, {distance} AS distance FROM retrieval_chunk c "
            f"WHERE {where} ORDER BY {distance} LIMIT %s"
        )
        return sql, [*params, literal, top_k]
