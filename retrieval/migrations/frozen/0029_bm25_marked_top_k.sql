-- The best k of the chunks holding given marks (the current definition; migration 0029
-- created it, retrieval/migrations/frozen/ keeps it as applied).
--
-- A narrow scope's BM25 ranking (services/sparse/scoped.py): p_marks, from
-- retrieval_bm25_scope_query, holds a query term and the scope's marks, so the chunks' GIN
-- index finds the scope's chunks holding a query term, and each is scored from its own row
-- of term frequencies as the top-k function scores one (Okapi BM25, the collection's idf and
-- length normalisation). p_k NULL returns them all, best first: when the marks find a
-- superset of the scope, the caller checks each against the scope's exact conditions until
-- k pass.
--
-- A PL/pgSQL function so that its statement is planned once per connection: planned per
-- search it took longer than running it. Its plan must not depend on the parameters: the
-- marks are every look-up's (collection-prefixed lexemes), through the GIN index, always.

CREATE OR REPLACE FUNCTION retrieval_bm25_marked_top_k(
    p_collection bigint, p_terms text[], p_k1 float8, p_b float8, p_k integer, p_marks tsquery
) RETURNS TABLE (chunk_id bigint, score float8) LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH n AS MATERIALIZED (
        SELECT p_k1 * (1 - p_b) AS a,
               p_k1 * p_b * s.chunk_count / greatest(s.total_length, 1) AS b,
               s.chunk_count
        FROM retrieval_bm25_stats s WHERE s.collection_id = p_collection
    ),
    q AS MATERIALIZED (
        SELECT t.term, (qt.qtf * ln(1 + (n.chunk_count - t.df + 0.5) / (t.df + 0.5)))::float8 AS w
        FROM n, (SELECT term, count(*) AS qtf FROM unnest(p_terms) AS term GROUP BY term) AS qt
        JOIN retrieval_bm25_term t ON t.collection_id = p_collection AND t.term = qt.term
    )
    SELECT d.chunk_id, sum(q.w * f.tf / (f.tf + n.a + n.b * d.dl))::float8 AS score
    FROM n, retrieval_bm25_chunk d
    CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
    CROSS JOIN q
    CROSS JOIN LATERAL (SELECT (t.tfs -> q.term)::integer AS tf) AS f
    WHERE d.lexemes @@ p_marks AND d.collection_id = p_collection AND f.tf IS NOT NULL
    GROUP BY d.chunk_id
    ORDER BY 2 DESC, d.chunk_id
    LIMIT p_k;
END $$;
