"""Exact BM25 top-k that reads a fraction of the postings (``retrieval/sql/bm25_top_k.sql``).

``retrieval_bm25_top_k``, a PL/pgSQL function (its plans are cached per connection),
ranks a whole collection. A term's contribution ``w · tf / (tf + a + b' · dl)`` is
bounded twice, from ``retrieval_bm25_term``: in any chunk, by its largest tf and
smallest ``dl / tf``; in a chunk holding it once (most postings), by the shortest
such chunk. A chunk's lexemes mark the terms it holds more than once.

1. θ, a lower bound of the final k-th score. When even the highest-bound (rarest)
   term is frequent, GIN finds the chunks holding three of the (up to) four
   highest-bound terms (both, for a query of two), each scored exactly from its own
   row (``retrieval_bm25_chunk.tfs``), and θ is the k-th best. Otherwise, or if
   fewer than k, that term's postings give θ (a posting's contribution is a lower
   bound of its chunk's score).
2. A chunk holding several query terms scores at most the sum of their bounds
   (once or repeated). A search over term sets, in the query's bound order, each
   term once or repeated, finds the sets whose bounds reach θ; GIN fetches their
   chunks (those step 1 did not score) and each is scored as found, so θ rises.
3. A chunk holding one query term scores that term's contribution: only terms whose
   bound reaches θ have their posting list read, and only postings reaching θ count.

Everything else provably scores below θ, so the result is the exhaustive ranking's
(same scores; chunks of equal score may swap). When step 1 leaves θ at 0 (fewer than
k chunks hold the highest-bound term), a query of more than four terms reads every
posting instead, as a filtered search does (``BM25Retriever.score``).

A chunk's row is scored in one expression over 4, 8 or 16 term slots, the fewest
that hold the query's terms, its ``tfs`` decompressed once (PostgreSQL compresses a
long chunk's).

Given a scope as the chunks' scope marks (``retrieval/sql/bm25_scope_marks.sql``), the
function ranks the scope's chunks alone: the scope is ANDed into every GIN look-up, and
a term's postings are read as the look-up of its lexeme and the scope. The bounds stay
the collection's (upper bounds for any of its chunks), θ comes from the scope's chunks,
so the ranking is the exhaustive scoped one when the marks are exactly the scope.

Given as well a declared scope's marks (its chunks have a GIN index of their own,
``indexes/pgvector/ddl.py``), every look-up holds them, and the function's statements are
planned for the call, so that the planner matches them to that index's predicate and
reads the scope's own index.
"""

from __future__ import annotations

TOP_K_SQL = "SELECT chunk_id, score FROM retrieval_bm25_top_k(%s, %s::text[], %s, %s, %s)"

# The same under a scope the index marks exactly (``sparse/scoped.py``): its marks, as
# ``retrieval_bm25_scope_query`` builds them without terms, ANDed into every look-up.
SCOPED_TOP_K_SQL = (
    "SELECT chunk_id, score FROM retrieval_bm25_top_k(%s, %s::text[], %s, %s, %s, "
    "retrieval_bm25_scope_query(%s, NULL, %s::bigint[], %s::text[], %s::jsonb))"
)

# The same under a declared scope (``sparse/scoped.py``): its marks, as a partial GIN index
# of its chunks' lexemes has them for its predicate, given too.
INDEXED_TOP_K_SQL = (
    SCOPED_TOP_K_SQL[:-1] + ", retrieval_bm25_scope_query(%s, NULL, NULL, %s::text[], %s::jsonb))"
)

# The collection's length normalisation ``n``: its parameters k1, b, k1, b, the collection.
STATS_CTE = """
WITH n AS MATERIALIZED (
    SELECT %s::float8 * (1 - %s::float8) AS a,
           %s::float8 * %s::float8 * s.chunk_count / greatest(s.total_length, 1) AS b,
           s.chunk_count
    FROM retrieval_bm25_stats s WHERE s.collection_id = %s
)"""

# The per-query constants (idf as float8, length normalisation), computed once for the
# few query terms: ``n`` and the terms' weights ``q``, shared by ``BM25Retriever``'s
# statements that score outside the top-k functions (``retrieval/sql/``). Its
# parameters: k1, b, k1, b, the collection, the terms, the collection.
WEIGHTS_SQL = (
    STATS_CTE
    + """,
q AS MATERIALIZED (
    SELECT t.term, (qt.qtf * ln(1 + (n.chunk_count - t.df + 0.5) / (t.df + 0.5)))::float8 AS w
    FROM n, (SELECT term, count(*) AS qtf FROM unnest(%s::text[]) AS term GROUP BY term) AS qt
    JOIN retrieval_bm25_term t ON t.collection_id = %s AND t.term = qt.term
)
"""
)

# A query whose terms synonyms expanded (``sparse/synonyms.py``), ranked exhaustively:
# each query term is a group of alternatives, OR'd as one term (Lucene's
# ``SynonymQuery``): a chunk's tf is the sum of its alternatives' tfs, the group's df
# the largest of theirs. Its parameters: k1, b, k1, b, the collection, the groups'
# numbers, terms and query frequencies (one row per alternative), the collection twice,
# then the filter's and the limit.
GROUPED_SCORE_SQL = (
    STATS_CTE
    + """,
alt AS MATERIALIZED (
    SELECT * FROM unnest(%s::int[], %s::text[], %s::int[]) AS alt(grp, term, qtf)
),
q AS MATERIALIZED (
    SELECT alt.grp,
           (max(alt.qtf) * ln(1 + (n.chunk_count - max(t.df) + 0.5) / (max(t.df) + 0.5)))::float8
           AS w
    FROM n, alt JOIN retrieval_bm25_term t ON t.collection_id = %s AND t.term = alt.term
    GROUP BY alt.grp, n.chunk_count
)
SELECT g.chunk_id, sum(q.w * g.tf / (g.tf + n.a + n.b * g.dl)) AS score
FROM n, q, (
    SELECT alt.grp, p.chunk_id, sum(p.tf) AS tf, max(p.dl) AS dl
    FROM alt JOIN retrieval_bm25_posting p ON p.collection_id = %s AND p.term = alt.term
    WHERE true {filter}
    GROUP BY alt.grp, p.chunk_id
) AS g
WHERE g.grp = q.grp
GROUP BY g.chunk_id
ORDER BY score DESC, g.chunk_id
LIMIT %s
"""
)
