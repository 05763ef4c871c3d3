"""Okapi BM25 computed inside PostgreSQL from the postings index."""

from __future__ import annotations

from django.db import connections

from retrieval.models import Collection
from retrieval.services.databases import search_database
from retrieval.services.filters import Filters
from retrieval.services.registry import analyzers
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.sparse.ranking import pruned_sql
from retrieval.services.types import ScoredChunk

# The per-query constants (idf, length normalisation) are computed once for the few
# query terms; then each term's posting list is read by an index-only scan of the
# primary key and summed in float8 (parameters are cast: numeric math is slow).
SCORE_SQL = """
WITH q AS MATERIALIZED (
    SELECT array_agg(t.term) AS terms,
           array_agg(qt.qtf * ln(1 + (s.chunk_count - t.df + 0.5) / (t.df + 0.5))) AS weights,
           %s::float8 * (1 - %s::float8) AS norm_a,
           %s::float8 * %s::float8 * max(s.chunk_count) / greatest(max(s.total_length), 1) AS norm_b
    FROM (SELECT term, count(*) AS qtf FROM unnest(%s::text[]) AS term GROUP BY term) AS qt
    JOIN retrieval_bm25_term t ON t.collection_id = %s AND t.term = qt.term
    JOIN retrieval_bm25_stats s ON s.collection_id = t.collection_id
)
SELECT p.chunk_id,
       sum(q.weights[array_position(q.terms, p.term)] * p.tf / (p.tf + q.norm_a + q.norm_b * p.dl))
           AS score
FROM q, retrieval_bm25_posting p
WHERE p.collection_id = %s AND p.term = ANY(q.terms)
{filter}
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %s
"""


class BM25Retriever(BaseRetriever):
    """Rank chunks by Okapi BM25 (Lucene's variant, as in bm25s and Anserini).

    ``score = Σ_t qtf · idf · tf / (tf + k1 · (1 - b + b · dl / avgdl))`` with
    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, summed over the query's terms;
    N, df and avgdl are the collection's, dl the chunk's length in terms (title
    included). Every returned chunk has a positive score: this idf is always > 0.
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        analyzer: str = "default",
        prune: bool = True,
    ) -> None:
        if not k1 >= 0:
            raise ValueError(f"k1 must be >= 0, not {k1!r}.")
        if not 0 <= b <= 1:
            raise ValueError(f"b must be within [0, 1], not {b!r}.")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = analyzer
        self.prune = bool(prune)

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
        conditions, condition_params = Filters.parse(filters).sql("c", collection_id=collection.pk)
        if conditions:
            filter_sql = (
                "AND p.chunk_id IN (SELECT c.id FROM retrieval_chunk c "
                f"WHERE c.collection_id = %s AND {' AND '.join(conditions)})"
            )
            filter_params = [collection.pk, *condition_params]
        norms = [self.k1, self.b, self.k1, self.b, list(terms)]
        if self.prune:
            sql = pruned_sql(collection_id=collection.pk, top_k=top_k, filter_sql=filter_sql)
            params = [*norms, top_k, *filter_params, 2 * top_k, *filter_params, top_k]
        else:
            sql = SCORE_SQL.format(filter=filter_sql)
            params = [*norms, collection.pk, collection.pk, *filter_params, top_k]
        with connections[search_database()].cursor() as cursor:
            cursor.execute(sql, params)
            return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]

    def pruning(
        self, terms: list[str], *, collection: Collection, top_k: int
    ) -> tuple[list[str], list[str], float]:
        """Return the terms whose postings a top-``top_k`` reads whole, the skipped ones, θ."""
        sql = pruned_sql(collection_id=collection.pk, top_k=top_k, filter_sql="", split=True)
        params = [self.k1, self.b, self.k1, self.b, list(terms), top_k, 2 * top_k]
        with connections[search_database()].cursor() as cursor:
            cursor.execute(sql, params)
            essential, others, theta = cursor.fetchone()
        return sorted(essential or []), sorted(others or []), float(theta or 0)
