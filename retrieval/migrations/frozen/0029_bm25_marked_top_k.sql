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
