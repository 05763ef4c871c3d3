"""Dense retrieval over pgvector: cosine distance, ranked inside PostgreSQL."""

from __future__ import annotations

from django.db import connections, transaction

from retrieval.exceptions import DimensionMismatchError
from retrieval.models import Chunk, Collection
from retrieval.services.collections import embedder_for
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
        ef_search: int = 40,
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
        chunks, ranked = self._querysets(vector, collection=collection, filters=filters)
        with transaction.atomic(using=chunks.db):
            self._plan(chunks, filters, top_k)
            rows = list(ranked.values_list("pk", "distance")[:top_k])
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
        chunks, ranked = self._querysets(vector, collection=collection, filters=filters)
        with transaction.atomic(using=chunks.db):
            self._plan(chunks, filters, top_k)
            return ranked.values_list("pk", "distance")[:top_k].explain()

    def _querysets(self, vector, *, collection: Collection, filters: Filters | None):
        if len(vector) != collection.dimensions:
            raise DimensionMismatchError(
                f"Query vector has {len(vector)} dimensions; collection {collection.name!r} "
                f"holds {collection.dimensions}."
            )
        chunks = Filters.parse(filters).apply(Chunk.objects.filter(collection=collection))
        ranked = chunks.nearest(vector, dimensions=collection.dimensions)
        if self.score_threshold is not None:
            ranked = ranked.filter(distance__lte=1.0 - self.score_threshold)
        return chunks, ranked

    def _plan(self, chunks, filters: Filters | None, top_k: int) -> None:
        """Set this transaction's planner options for the query about to run."""
        settings = {"hnsw.ef_search": str(max(self.ef_search, top_k))}
        if filters:
            matching = chunks.order_by().values("pk")[: self.exact_scan_limit + 1].count()
            if matching <= self.exact_scan_limit:
                # Few candidates: rank them all exactly instead of walking the graph.
                settings["enable_indexscan"] = "off"
            else:
                settings["hnsw.iterative_scan"] = "strict_order"
                settings["hnsw.max_scan_tuples"] = str(self.max_scan_tuples)
        with connections[chunks.db].cursor() as cursor:
            for name, value in settings.items():
                cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
