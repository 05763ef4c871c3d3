"""Okapi BM25 computed inside PostgreSQL from the postings index."""

from __future__ import annotations

from django.db import connections

from retrieval.models import Chunk, Collection
from retrieval.services.filters import Filters
from retrieval.services.registry import analyzers
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.types import ScoredChunk

# Query terms and statistics are materialised first (a few rows), then each query
# term's posting list is read by an index-only scan of the primary key.
SCORE_SQL = """
WITH query AS MATERIALIZED (
    SELECT term, count(*) AS qtf FROM unnest(%s::text[]) AS term GROUP BY term
), stats AS MATERIALIZED (
    SELECT chunk_count::float8 AS n, total_length::float8 / greatest(chunk_count, 1) AS avgdl
    FROM retrieval_bm25_stats WHERE collection_id = %s
), weights AS MATERIALIZED (
    SELECT t.term, q.qtf * ln(1 + (s.n - t.df + 0.5) / (t.df + 0.5)) AS weight
    FROM retrieval_bm25_term t JOIN query q ON q.term = t.term CROSS JOIN stats s
    WHERE t.collection_id = %s
)
SELECT p.chunk_id,
       sum(w.weight * p.tf / (p.tf + %s * (1 - %s + %s * p.dl / s.avgdl))) AS score
FROM weights w
JOIN retrieval_bm25_posting p ON p.collection_id = %s AND p.term = w.term
CROSS JOIN stats s
{filter}
GROUP BY p.chunk_id
HAVING sum(w.weight * p.tf) > 0
ORDER BY score DESC, p.chunk_id
LIMIT %s
"""


class BM25Retriever(BaseRetriever):
    """Rank chunks by Okapi BM25 (Lucene's variant, as in bm25s and Anserini).

    ``score = Σ_t qtf · idf · tf / (tf + k1 · (1 - b + b · dl / avgdl))`` with
    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, summed over the query's terms;
    N, df and avgdl are the collection's, dl the chunk's length in terms (title
    included). Only chunks with a positive
    score are returned.
    """

    def __init__(self, *, k1: float = 0.9, b: float = 0.4, analyzer: str = "default") -> None:
        if not k1 >= 0:
            raise ValueError(f"k1 must be >= 0, not {k1!r}.")
        if not 0 <= b <= 1:
            raise ValueError(f"b must be within [0, 1], not {b!r}.")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = analyzer

    def prepare(self, query: str, *, collection: Collection) -> list[str]:
        """Analyse the query into index terms."""
        return analyzers[self.analyzer].terms(query)

    def _rank(
        self, terms: list[str], *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        if not terms:
            return []
        scored = self.score(terms, collection=collection, top_k=top_k, filters=filters)
        return [ScoredChunk(chunk_id, score) for chunk_id, score in scored]

    def score(
        self,
        terms: list[str],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
    ) -> list[tuple[int, float]]:
        """Return ``(chunk id, score)`` of the best ``top_k`` chunks for analysed ``terms``."""
        filter_sql, filter_params = "", []
        chunks = Chunk.objects.filter(collection=collection)
        if filters:
            subquery = filters.apply(chunks).values("pk")
            sql, filter_params = subquery.query.sql_with_params()
            filter_sql = f"WHERE p.chunk_id IN ({sql})"
            filter_params = list(filter_params)
        params = [
            list(terms),
            collection.pk,
            collection.pk,
            self.k1,
            self.b,
            self.b,
            collection.pk,
            *filter_params,
            top_k,
        ]
        with connections[chunks.db].cursor() as cursor:
            cursor.execute(SCORE_SQL.format(filter=filter_sql), params)
            return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]
