"""Okapi BM25 computed inside PostgreSQL from the postings index."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db import connections

from retrieval.models import Collection
from retrieval.services.core.databases import search_database
from retrieval.services.core.filters import Filters, estimated_rows_each
from retrieval.services.indexes.scopes import declared_marks, indexed_scope, scope_parts
from retrieval.services.registry import analyzers
from retrieval.services.retrievers.base import BaseRetriever, check_top_k, scaled_by_best
from retrieval.services.sparse.ranking import GROUPED_SCORE_SQL, TOP_K_SQL, WEIGHTS_SQL
from retrieval.services.sparse.scoped import (
    SCOPE_PRUNING_SHARE,
    ScopedSearch,
    index_marks,
    indexed_chunk_count,
    scoped_statement,
    scoped_top_k,
)
from retrieval.services.sparse.synonyms import ExpandedTerms, expand
from retrieval.services.types import ScoredChunk

# The exhaustive plan (``prune=False``, long queries, and scoped searches the planner
# sends here): each term's posting list is read by an index-only scan of the primary
# key, joined to its term, and summed in float8.
SCORE_SQL = (
    WEIGHTS_SQL
    + """SELECT p.chunk_id, sum(q.w * p.tf / (p.tf + n.a + n.b * p.dl)) AS score
FROM n, q, retrieval_bm25_posting p
WHERE p.collection_id = %s AND p.term = q.term
{filter}
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %s
"""
)

# Given chunks scored from their own rows (``retrieval_bm25_chunk.tfs``, decompressed
# once), as the top-k function scores them: one look-up per chunk, not per posting.
CHUNKS_SCORE_SQL = (
    WEIGHTS_SQL
    + """SELECT d.chunk_id, sum(q.w * f.tf / (f.tf + n.a + n.b * d.dl)) AS score
FROM n, retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
CROSS JOIN q
CROSS JOIN LATERAL (SELECT (t.tfs -> q.term)::integer AS tf) AS f
WHERE d.chunk_id = ANY(%s) AND d.collection_id = %s AND f.tf IS NOT NULL
GROUP BY d.chunk_id
"""
)


# Queries of more distinct terms than this are ranked exhaustively: the top-k function's
# search over term pairs grows with the square of their number. Past 16 terms it loses
# at 1M chunks too (`bench/latency.py --long-queries`; figures in the README's design
# notes, *BM25 top k without reading every posting*). The function itself scores at most
# 16 (migration 0015) and ranks a longer query exhaustively.
MAX_PRUNED_TERMS = 16


class BM25Retriever(BaseRetriever):
    """Rank chunks by Okapi BM25 (Lucene's variant, as in bm25s and Anserini).

    ``score = Σ_t qtf · idf · tf / (tf + k1 · (1 - b + b · dl / avgdl))`` with
    ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, summed over the query's terms;
    N, df and avgdl are the collection's, dl the chunk's length in terms (title
    included). Every returned chunk has a positive score: this idf is always > 0.

    ``prune`` ranks with the exact top-k function (``services/sparse/ranking.py``); under
    filters or a document scope, a scope allowing at most ``scope_scan_limit`` chunks
    (PostgreSQL's estimate) has its chunks holding a query term found through the index's
    scope marks and scored; a wider one the marks express exactly, of at most
    ``scope_pruning_share`` of the collection, is ranked by the top-k function with the
    marks in its look-ups (and, for a declared scope the filters imply, its own GIN
    index serving them, at once); any other over-fetches the top-k function's ranking,
    widening up to ``max_over_fetch`` chunks, past which (or when even the first
    over-fetch would pass it) every allowed posting is ranked (``services/sparse/scoped.py``).
    Every way returns the exhaustive ranking.
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        analyzer: str = "default",
        prune: bool = True,
        scope_scan_limit: int = 20000,
        scope_pruning_share: float = SCOPE_PRUNING_SHARE,
        max_over_fetch: int = 4000,
    ) -> None:
        if not k1 >= 0:
            raise ValueError(f"k1 must be >= 0, not {k1!r}.")
        if not 0 <= b <= 1:
            raise ValueError(f"b must be within [0, 1], not {b!r}.")
        self.k1 = float(k1)
        self.b = float(b)
        self.analyzer = analyzer
        if scope_scan_limit < 0:
            raise ValueError(f"scope_scan_limit must be >= 0, not {scope_scan_limit!r}.")
        if not 0 <= scope_pruning_share <= 1:
            raise ValueError(
                f"scope_pruning_share must be within [0, 1], not {scope_pruning_share!r}."
            )
        if max_over_fetch < 1:
            raise ValueError(f"max_over_fetch must be positive, not {max_over_fetch!r}.")
        self.prune = bool(prune)
        self.scope_scan_limit = int(scope_scan_limit)
        self.scope_pruning_share = float(scope_pruning_share)
        self.max_over_fetch = int(max_over_fetch)

    def prepare(self, query: str, *, collection: Collection) -> list[str]:
        """Analyse the query into index terms, with the collection's synonyms
        (:class:`~retrieval.services.sparse.synonyms.ExpandedTerms` when one fires)."""
        analyzer = analyzers[self.analyzer]
        terms = analyzer.terms(query)
        return expand(terms, collection=collection, analyzer=analyzer, analyzer_alias=self.analyzer)

    def normalise(self, ranking: list[ScoredChunk]) -> list[ScoredChunk]:
        """BM25 scores divided by the ranking's best: the best result scores 1."""
        return scaled_by_best(ranking)

    def _rank(
        self, terms: list[str], *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        if not terms:
            return []
        scored = self.score(terms, collection=collection, top_k=top_k, filters=filters)
        return [ScoredChunk(chunk_id, score) for chunk_id, score in scored]

    def send_rank(
        self, terms: list[str], *, collection: Collection, top_k: int, filters: Filters
    ) -> Callable[[], list[ScoredChunk]] | None:
        """Send the ranking query (one statement); return a function that reads its rows.

        ``None`` for a scoped search, whose planner may need several statements.
        """
        check_top_k(top_k)
        if not terms:
            return list
        filters = Filters.parse(filters)
        if self._scoped_plan(terms, filters):
            return None  # several statements: ranked by ``rank_prepared``
        sql, params = self._query(terms, collection, top_k, Filters.parse(filters))
        cursor = connections[search_database()].cursor()
        cursor.execute(sql, params)

        def fetch() -> list[ScoredChunk]:
            with cursor:  # fetchall: one call for the rows, not a pipeline fetch each
                return [
                    ScoredChunk(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()
                ]

        return fetch

    def score(
        self,
        terms: list[str],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
    ) -> list[tuple[int, float]]:
        """Return ``(chunk id, score)`` of the best ``top_k`` chunks for analysed ``terms``."""
        filters = Filters.parse(filters)
        if self._scoped_plan(terms, filters):
            return self._score_scoped(terms, collection, top_k, filters)
        sql, params = self._query(terms, collection, top_k, filters)
        with connections[search_database()].cursor() as cursor:
            cursor.execute(sql, params)
            return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]

    def score_chunks(
        self, terms: list[str], chunk_ids: Sequence[int], *, collection: Collection
    ) -> dict[int, float]:
        """Return the BM25 scores of the given chunks (those holding none of the terms: 0)."""
        if not terms or not chunk_ids:
            return {}
        if isinstance(terms, ExpandedTerms):
            sql, params = self._grouped_query(
                terms, collection, len(chunk_ids), "AND p.chunk_id = ANY(%s)", [list(chunk_ids)]
            )
            with connections[search_database()].cursor() as cursor:
                cursor.execute(sql, params)
                return {chunk_id: float(score) for chunk_id, score in cursor.fetchall()}
        params = [*self._weights_params(terms, collection), list(chunk_ids), collection.pk]
        with connections[search_database()].cursor() as cursor:
            cursor.execute(CHUNKS_SCORE_SQL, params)
            return {chunk_id: float(score) for chunk_id, score in cursor.fetchall()}

    def _scoped_plan(self, terms: list[str], filters: Filters) -> bool:
        """True when a filtered search is ranked by the scoped planner (not a query
        synonyms expanded: it is ranked exhaustively)."""
        if isinstance(terms, ExpandedTerms):
            return False
        return self.prune and bool(filters) and len(set(terms)) <= MAX_PRUNED_TERMS

    def _score_scoped(
        self, terms: list[str], collection: Collection, top_k: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """Rank under the filters. A reader's scope holding a token with a declared scope
        is ranked in parts (``scope_parts``: each such token, then the rest) and merged:
        each part's top k holds every chunk of the whole scope's top k that it allows.

        The collection's size is read once, every part's size estimated in one plan, and
        parts the planner ranks in one statement each are ranked in one statement."""
        parts = [part.resolved(collection.pk) for part in scope_parts(collection, filters)]
        wheres = [part.sql("c", collection_id=collection.pk) for part in parts]
        with connections[search_database()].cursor() as cursor:
            chunk_count = indexed_chunk_count(cursor, collection.pk)
            if not chunk_count:
                return []  # nothing indexed
            estimates = estimated_rows_each(
                cursor, [part.estimate_query(collection.pk) for part in parts]
            )
            searches = [
                self._scoped_search(terms, collection, top_k, part, *where, chunk_count, n)
                for part, where, n in zip(parts, wheres, estimates, strict=True)
            ]
            if len(searches) == 1:
                return self._rank_part(cursor, searches[0], collection, filters=parts[0])
            statements = [scoped_statement(search) for search in searches]
            if all(statements):
                union = (f"SELECT * FROM ({sql}) AS p{i}" for i, (sql, _) in enumerate(statements))
                cursor.execute(
                    " UNION ALL ".join(union), [p for _, params in statements for p in params]
                )
                rows = [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]
            else:
                rows = [
                    row
                    for search, part in zip(searches, parts, strict=True)
                    for row in self._rank_part(cursor, search, collection, filters=part)
                ]
        return sorted(dict(rows).items(), key=lambda row: (-row[1], row[0]))[:top_k]

    def _scoped_search(
        self,
        terms: list[str],
        collection: Collection,
        top_k: int,
        filters: Filters,
        conditions: list[str],
        params: list,
        chunk_count: int,
        estimate: float,
    ) -> ScopedSearch:
        """The planner's view of one part (resolved filters and their SQL conditions)."""
        declared = indexed_scope(collection, filters)
        return ScopedSearch(
            collection_id=collection.pk,
            terms=list(terms),
            k1=self.k1,
            b=self.b,
            top_k=top_k,
            conditions=conditions,
            params=params,
            marks=index_marks(filters),
            scan_limit=self.scope_scan_limit,
            pruning_share=self.scope_pruning_share,
            chunk_count=chunk_count,
            estimate=estimate,
            declared=declared_marks(declared) if declared is not None else None,
        )

    def _rank_part(
        self, cursor, search: ScopedSearch, collection: Collection, *, filters: Filters
    ) -> list[tuple[int, float]]:
        """Rank one part on its own (``scoped_top_k``)."""

        def exhaustive() -> list[tuple[int, float]]:
            sql, params = self._query(search.terms, collection, search.top_k, filters, prune=False)
            cursor.execute(sql, params)
            return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]

        max_fetch = max(self.max_over_fetch, search.top_k)
        return scoped_top_k(cursor, search, exhaustive=exhaustive, max_fetch=max_fetch)

    def _query(
        self,
        terms: list[str],
        collection: Collection,
        top_k: int,
        filters: Filters,
        *,
        prune: bool | None = None,
    ) -> tuple[str, list]:
        """Return the ranking SQL and its parameters: the top-k function, or the exhaustive
        plan with filters or more than ``MAX_PRUNED_TERMS`` distinct terms."""
        prune = self.prune if prune is None else prune
        filter_sql, filter_params = "", []
        conditions, condition_params = Filters.parse(filters).sql("c", collection_id=collection.pk)
        if conditions:
            filter_sql = (
                "AND p.chunk_id IN (SELECT c.id FROM retrieval_chunk c "
                f"WHERE c.collection_id = %s AND {' AND '.join(conditions)})"
            )
            filter_params = [collection.pk, *condition_params]
        if isinstance(terms, ExpandedTerms):
            return self._grouped_query(terms, collection, top_k, filter_sql, filter_params)
        if prune and not filter_sql and len(set(terms)) <= MAX_PRUNED_TERMS:
            sql, params = TOP_K_SQL, [collection.pk, list(terms), self.k1, self.b, top_k]
        else:
            sql = SCORE_SQL.format(filter=filter_sql)
            params = [*self._weights_params(terms, collection), collection.pk]
            params += [*filter_params, top_k]
        return sql, params

    def _grouped_query(
        self,
        terms: ExpandedTerms,
        collection: Collection,
        top_k: int,
        filter_sql: str,
        filter_params: list,
    ) -> tuple[str, list]:
        """Return ``GROUPED_SCORE_SQL`` and its parameters: each distinct query term one
        group of its alternatives."""
        numbers, alternatives, frequencies = [], [], []
        for number, (group, qtf) in enumerate(terms.groups()):
            for term in group:
                numbers.append(number)
                alternatives.append(term)
                frequencies.append(qtf)
        params = [self.k1, self.b, self.k1, self.b, collection.pk]
        params += [numbers, alternatives, frequencies, collection.pk, collection.pk]
        return GROUPED_SCORE_SQL.format(filter=filter_sql), [*params, *filter_params, top_k]

    def _weights_params(self, terms: list[str], collection: Collection) -> list:
        """The parameters of ``WEIGHTS_SQL``."""
        return [self.k1, self.b, self.k1, self.b, collection.pk, list(terms), collection.pk]
