"""Exact BM25 top k under filters and document scopes, without ranking every posting.

The top-k function (``ranking.py``) ranks a whole collection. A scoped search (a
document scope from the access policy, metadata or document filters) needs the best
``k`` of the chunks the scope allows, and chooses between exact ways by the size of
that set as PostgreSQL's planner estimates it (from the statistics of the chunks'
metadata and access; planning only, no rows read):

- **A declared scope** (``retrieval_scope_index``) has a GIN index of its chunks' lexemes
  (a partial index, its marks the predicate). A search the marks express exactly, whose
  filters imply that scope, of at most ``pruning_share`` of the collection (estimated),
  is ranked by the top-k function with the scope's marks in its look-ups and that index
  serving them. At 1M chunks (each plan in turn, one process) a 10% metadata scope took
  1.08x the open search this way against 1.87x undeclared, a 1% one 1.03x against 1.31x;
  a 0.1% one 0.74x against 0.61x through the marks below (both under the open search),
  and a 50% one 1.92x against 1.62x over-fetching, which it still does.
- **A narrow scope** (at most ``scan_limit`` chunks estimated) that the index marks
  (its documents, access tokens or metadata leaves: ``retrieval/sql/bm25_scope_marks.sql``)
  is one look-up of the chunks' GIN index: the scope's chunks holding a query term, each
  scored from its own row (``retrieval_bm25_chunk.tfs``), by a PL/pgSQL function whose
  plan is cached (``retrieval/sql/bm25_marked_top_k.sql``: planned per search, the
  statement took 0.6-0.75 ms to plan and 0.12-0.16 to run at 1M chunks). The cost
  follows the scope's matching chunks, neither the posting lists nor the scope's other
  chunks. Where the marks find a superset of the scope (a metadata filter's leaves, or
  a scope's part they cannot express, such as a ``DOCUMENT_ACCESS`` hook), each result,
  best first, is checked against the scope's exact conditions until ``k`` pass. At 1M
  chunks a 1% scope took 5.0-5.6 ms p50 this way, where the over-fetch below took 20-23.
- **A wider scope the marks express exactly** (access tokens without a
  ``DOCUMENT_ACCESS`` hook, document ids, a metadata filter with no empty object or
  array and no object or array inside an array), of at most ``pruning_share`` of the
  collection (estimated), is ranked by the top-k function with the marks ANDed into each of
  its index look-ups (``ranking.py``): its pruning bound comes from the scope's own
  chunks. At 1M chunks a 10% scope took 7.5-7.7 ms p50 and 12-13 p95 this way (the
  latency bench); taking turns with the over-fetch below, it tied on p50 (9.0-9.2 ms
  against 9.0-9.6) and took 13.3-13.6 ms p95 against 21.5-22.0.
- **Any other wider one** over-fetches the pruned ranking: the collection's top ``k'``
  (``k'`` first twice what the estimated share needs for ``k`` to survive, at least
  ``4k``) from the top-k function, of which the allowed chunks are kept.
  Once ``k`` survive, they are the scoped top k: an allowed chunk outside the top
  ``k'`` scores at most the ``k'``-th score, so no more than any survivor (equal scores
  may swap, as in the top-k function). If fewer survive, ``k'`` widens — at least
  doubling, to 1.5 times what the share of survivors so far says is needed — until
  ``k`` survive or the function returns fewer than ``k'`` chunks (every chunk holding
  a query term: the survivors are then all the scope's matches). Past ``max_fetch``
  the exhaustive plan ranks the allowed chunks' postings instead.
- **A scope ranked through the marks neither way** (unmarked, or wider than
  ``scan_limit`` and not exactly marked) **and too narrow to over-fetch** (the first
  ``k'`` already past ``max_fetch``) goes to the exhaustive plan at once.

A wrong estimate costs time, never exactness.

Every way returns what the exhaustive scoped ranking returns (tests/services/
retrievers/test_bm25_scoped.py checks each against it); the figures that set the
defaults are in the README (*BM25 inside PostgreSQL*, scoped searches).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.services.core.filters import Filters
from retrieval.services.sparse.ranking import (
    INDEXED_TOP_K_SQL,
    SCOPED_TOP_K_SQL,
    TOP_K_SQL,
)

#: The smallest first over-fetch, in multiples of k: a scope of half the chunks keeps
#: k of 4k all but always.
FIRST_FETCH = 4

# The collection's size.
CHUNK_COUNT_SQL = "SELECT chunk_count FROM retrieval_bm25_stats WHERE collection_id = %s"

#: The widest share of the collection an exactly marked scope is ranked by the top-k
#: function at; a wider one over-fetches. At 1M chunks the function ties the over-fetch
#: at 10% on p50 (better p95) and takes 2.5 times as long at 50% (17.4 ms against 6.4-6.9);
#: 20% lies between, not measured.
SCOPE_PRUNING_SHARE = 0.2

#: A document filter of more documents than this is not marked (checked exactly only).
MAX_MARKED_DOCUMENTS = 1000

#: The lexemes hold terms of at most this many bytes (tsvector's limit; migration 0011):
#: a query holding a longer one is not ranked through them.
MAX_LEXEME_BYTES = 1000

# The scope's chunks holding a query term, found through the GIN index, each scored from
# its own row as the top-k function scores one (``retrieval_bm25_marked_top_k``): the best
# k when the marks are exactly the scope; otherwise all, best first, each checked against
# the scope's exact conditions until k pass.
MARKED_TOP_K_SQL = (
    "SELECT chunk_id, score FROM retrieval_bm25_marked_top_k(%s, %s::text[], %s, %s, %s, "
    "retrieval_bm25_scope_query(%s, %s::text[], %s::bigint[], %s::text[], %s::jsonb))"
)
CHECKED_MARKED_SQL = (
    "SELECT s.chunk_id, s.score FROM ("
    + MARKED_TOP_K_SQL
    + """) AS s
WHERE EXISTS (SELECT 1 FROM retrieval_chunk c
              WHERE c.id = s.chunk_id AND c.collection_id = %s AND {conditions})
ORDER BY s.score DESC, s.chunk_id
LIMIT %s
"""
)

# The collection's top k', the allowed ones kept; a last row (id NULL) counts all k'.
OVER_FETCH_SQL = (
    "WITH t AS MATERIALIZED ("
    + TOP_K_SQL
    + """)
SELECT t.chunk_id, t.score FROM t
WHERE EXISTS (SELECT 1 FROM retrieval_chunk c
              WHERE c.id = t.chunk_id AND c.collection_id = %s AND {conditions})
UNION ALL
SELECT NULL, count(*) FROM t
"""
)


@dataclass(frozen=True)
class ScopeMarks:
    """A scope as the index marks it: ``retrieval_bm25_scope_query``'s documents, access
    tokens and metadata filter (JSON); ``exact`` when the chunks holding the marks are
    the scope's, not a superset."""

    documents: list[int] | None
    tokens: list[str] | None
    metadata: str | None
    exact: bool

    @property
    def params(self) -> list[object]:
        return [self.documents, self.tokens, self.metadata]


def index_marks(filters: Filters) -> ScopeMarks | None:
    """Return the scope as the index marks it, or ``None`` when it marks none of it.

    ``filters`` are resolved (``Filters.resolved``): external document ids are ids.
    """
    documents = filters.document_ids
    if documents is not None and not 0 < len(documents) <= MAX_MARKED_DOCUMENTS:
        documents = None
    tokens = list(filters.reader.tokens) if filters.reader is not None else None
    metadata = json.dumps(filters.metadata) if _has_leaf(filters.metadata) else None
    if documents is None and not tokens and metadata is None:
        return None
    exact = (
        (filters.document_ids is None or documents is not None)
        and (filters.documents_within is None or bool(tokens) and filters.reader.others is None)
        and (not filters.metadata or _marked_exactly(filters.metadata))
    )
    return ScopeMarks(list(documents) if documents is not None else None, tokens, metadata, exact)


def _has_leaf(value: object) -> bool:
    """Whether a JSON value holds a scalar (a metadata filter's leaf, which the index marks)."""
    if isinstance(value, dict):
        return any(_has_leaf(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_leaf(v) for v in value)
    return True


def _marked_exactly(value: object, *, in_array: bool = False) -> bool:
    """Whether the metadata holding a filter's leaves is the metadata containing it: no
    empty object or array (no leaf) and no object or array inside an array (whose leaves
    must be found in one element)."""
    if isinstance(value, dict | list):
        inner = value.values() if isinstance(value, dict) else value
        nested = isinstance(value, list)
        return (
            bool(value) and not in_array and all(_marked_exactly(v, in_array=nested) for v in inner)
        )
    return True


def indexed_chunk_count(cursor, collection_id: int) -> int:
    """Return how many chunks the collection's BM25 index holds (0: none)."""
    cursor.execute(CHUNK_COUNT_SQL, [collection_id])
    row = cursor.fetchone()
    return row[0] if row is not None and row[0] else 0


@dataclass(frozen=True)
class ScopedSearch:
    """One scoped BM25 ranking: the query, the scope, and what the planner knows of it.

    ``conditions`` are SQL conditions on the chunk table aliased ``c`` (``Filters.sql``)
    with their ``params``; ``marks`` the same scope as the index marks it
    (``index_marks``); ``chunk_count`` the collection's indexed chunks
    (``indexed_chunk_count``) and ``estimate`` the planner's estimate of the allowed ones
    (``core.filters.allowed_chunks``' rows), both read once per search however many parts it ranks;
    ``declared`` a declared scope the conditions imply, as its marks take it (its access
    tokens and metadata JSON: ``indexes.scopes.declared_marks``).
    """

    collection_id: int
    terms: list[str]
    k1: float
    b: float
    top_k: int
    conditions: list[str]
    params: list[object]
    marks: ScopeMarks | None
    scan_limit: int
    pruning_share: float
    chunk_count: int
    estimate: float
    declared: tuple[list[str] | None, str | None] | None = None

    @property
    def share(self) -> float:
        """The estimated share of the collection the scope allows (at least one chunk)."""
        return min(max(self.estimate, 1.0) / self.chunk_count, 1.0)


def scoped_statement(search: ScopedSearch) -> tuple[str, list[object]] | None:
    """Return the one statement (SQL, parameters) that ranks the scope's top k when the
    planner chooses one (a declared scope's index, the marks, the top-k function with the
    marks); ``None`` when it over-fetches or ranks exhaustively (``scoped_top_k``)."""
    marks, terms, collection_id = search.marks, list(search.terms), search.collection_id
    if marks is None or any(len(t.encode()) > MAX_LEXEME_BYTES for t in terms):
        return None
    top_k = [collection_id, terms, search.k1, search.b, search.top_k, collection_id]
    top_k += marks.params
    if marks.exact and search.declared is not None and search.share <= search.pruning_share:
        # A declared scope's own GIN index serves the top-k function's look-ups.
        return INDEXED_TOP_K_SQL, [*top_k, collection_id, *search.declared]
    if search.estimate <= search.scan_limit:
        # A narrow scope the index marks: its chunks holding a query term.
        marked = [collection_id, terms, search.k1, search.b]
        scope_query = [collection_id, terms, *marks.params]
        if marks.exact:
            return MARKED_TOP_K_SQL, [*marked, search.top_k, *scope_query]
        return CHECKED_MARKED_SQL.format(conditions=" AND ".join(search.conditions)), [
            *marked,
            None,  # all of them, best first
            *scope_query,
            collection_id,
            *search.params,
            search.top_k,
        ]
    if marks.exact and search.share <= search.pruning_share:
        # The top-k function's own pruning, the marks in each of its index look-ups.
        return SCOPED_TOP_K_SQL, top_k
    return None


def scoped_top_k(
    cursor,
    search: ScopedSearch,
    *,
    exhaustive: Callable[[], list[tuple[int, float]]],
    max_fetch: int,
) -> list[tuple[int, float]]:
    """Return ``(chunk id, score)`` of the best ``top_k`` chunks the scope allows.

    When ``scoped_statement`` chooses no statement, the collection's pruned top k' is
    over-fetched (at most ``max_fetch``), or ``exhaustive`` ranks every allowed posting
    (the fallback).
    """
    if not search.chunk_count:
        return []  # nothing indexed
    statement = scoped_statement(search)
    if statement is not None:
        cursor.execute(*statement)
        return [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]
    top_k, collection_id = search.top_k, search.collection_id
    # k' from the estimated share, so that about twice k survive.
    fetch = max(top_k * FIRST_FETCH, math.ceil(2 * top_k / search.share))
    if fetch > max_fetch:
        # Too narrow for its k to survive an over-fetch: PostgreSQL's own plan ranks its
        # postings (each over-fetched chunk would cost a scope check).
        return exhaustive()
    sql = OVER_FETCH_SQL.format(conditions=" AND ".join(search.conditions))
    head = [collection_id, list(search.terms), search.k1, search.b]
    while True:
        fetch = min(fetch, max_fetch)
        cursor.execute(sql, [*head, fetch, collection_id, *search.params])
        rows = cursor.fetchall()
        fetched = next(int(score) for chunk_id, score in rows if chunk_id is None)
        kept = sorted(
            ((chunk_id, float(score)) for chunk_id, score in rows if chunk_id is not None),
            key=lambda row: (-row[1], row[0]),
        )
        if len(kept) >= top_k or fetched < fetch:
            return kept[:top_k]
        if fetch >= max_fetch:
            return exhaustive()
        # The share of the ranking the scope keeps, from what survived so far.
        wanted = 1.5 * top_k * fetched / len(kept) if kept else 4 * fetch
        fetch = max(2 * fetch, math.ceil(wanted))
