"""Exact BM25 top-k in one SQL statement, with MaxScore-style pruning of frequent terms.

Each query term's contribution to a chunk's score is bounded from above by
``w · max_tf / (max_tf + a + b' · min_dl)`` (its largest tf, its shortest chunk; see
migration 0010). The statement

1. scores a few *pilot* chunks exactly (the best holders of the highest-bound terms):
   the k-th best of those scores, θ, is a lower bound of the final k-th score;
2. calls a term *non-essential* when it and every term of smaller bound, summed, stay
   below θ: a chunk holding only such terms cannot reach the top k;
3. reads the postings of the essential terms only (the rare ones, in practice), and
   looks up the non-essential terms' postings just for chunks whose partial score
   plus those bounds can still reach θ.

The result is the exhaustive ranking's (same floats, same order); only postings that
cannot change it are skipped. Filters apply to the pilots and the candidates alike.
"""

from __future__ import annotations

# Parameters, in order: k1, b, k1, b, terms, k, [filter], pilot count (the head),
# then [filter], k (the tail).
PRUNED_HEAD = """
WITH n AS MATERIALIZED (
    SELECT %s::float8 * (1 - %s::float8) AS a,
           %s::float8 * %s::float8 * s.chunk_count / greatest(s.total_length, 1) AS b,
           s.chunk_count
    FROM retrieval_bm25_stats s WHERE s.collection_id = {collection}
),
q AS MATERIALIZED (
    SELECT t.term, w.w,
           w.w * t.max_tf / (t.max_tf + n.a + n.b * t.min_dl) * (1 + 1e-9) AS bound,
           t.df
    FROM n,
         (SELECT term, count(*) AS qtf FROM unnest(%s::text[]) AS term GROUP BY term) AS qt
    JOIN retrieval_bm25_term t ON t.collection_id = {collection} AND t.term = qt.term
    CROSS JOIN LATERAL (
        SELECT qt.qtf * ln(1 + (n.chunk_count - t.df + 0.5) / (t.df + 0.5)) AS w
    ) AS w
),
ranked AS MATERIALIZED (
    SELECT q.*,
           coalesce(sum(df) OVER (ORDER BY bound DESC, term
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               AS df_before,
           sum(bound) OVER (ORDER BY bound, term) AS bound_upto
    FROM q
),
pilots AS MATERIALIZED (
    SELECT p.chunk_id
    FROM ranked r, n, retrieval_bm25_posting p
    WHERE r.df_before < %s AND p.collection_id = {collection} AND p.term = r.term {filter}
    GROUP BY p.chunk_id
    ORDER BY sum(r.w * p.tf / (p.tf + n.a + n.b * p.dl)) DESC
    LIMIT %s
),
theta AS MATERIALIZED (
    SELECT coalesce((
        SELECT sum(r.w * p.tf / (p.tf + n.a + n.b * p.dl)) AS score
        FROM pilots d, n, ranked r, retrieval_bm25_posting p
        WHERE p.collection_id = {collection} AND p.term = r.term AND p.chunk_id = d.chunk_id
        GROUP BY d.chunk_id
        ORDER BY score DESC
        OFFSET {k_minus_1} LIMIT 1
    ), 0) AS theta
),
split AS MATERIALIZED (
    SELECT array_agg(term) FILTER (WHERE bound_upto >= theta) AS essential,
           array_agg(term) FILTER (WHERE bound_upto < theta) AS others,
           coalesce(max(bound_upto) FILTER (WHERE bound_upto < theta), 0) AS others_bound,
           max(theta) AS theta
    FROM ranked, theta
)"""

PRUNED_TAIL = """,
candidates AS MATERIALIZED (
    SELECT p.chunk_id, sum(r.w * p.tf / (p.tf + n.a + n.b * p.dl)) AS partial
    FROM split, n, ranked r, retrieval_bm25_posting p
    WHERE r.term = ANY(split.essential) AND p.collection_id = {collection}
      AND p.term = r.term {filter}
    GROUP BY p.chunk_id
)
SELECT c.chunk_id,
       c.partial + coalesce((
           SELECT sum(r.w * p.tf / (p.tf + n.a + n.b * p.dl))
           FROM ranked r, retrieval_bm25_posting p
           WHERE r.term = ANY(split.others) AND p.collection_id = {collection}
             AND p.term = r.term AND p.chunk_id = c.chunk_id
       ), 0) AS score
FROM candidates c, split, n
WHERE c.partial + split.others_bound >= split.theta
ORDER BY score DESC, c.chunk_id
LIMIT %s
"""


def pruned_sql(*, collection_id: int, top_k: int, filter_sql: str, split: bool = False) -> str:
    """Return the statement for one collection and k (both inlined: they are integers).

    ``split=True`` returns just the essential terms, the others and θ (the head's
    parameters only): what a query would prune, for tests and benchmarks.
    """
    tail = "\nSELECT essential, others, theta FROM split" if split else PRUNED_TAIL
    return (PRUNED_HEAD + tail).format(
        collection=int(collection_id), k_minus_1=int(top_k) - 1, filter=filter_sql
    )
