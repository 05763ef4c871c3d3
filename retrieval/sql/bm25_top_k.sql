-- Exact BM25 top k reading a fraction of the postings (the current definition; migration
-- 0011 created it, 0015-0017, 0026 and 0028 changed it, and retrieval/migrations/frozen/ keeps each
-- version as it was applied). Why each step keeps the result exact:
-- retrieval/services/sparse/ranking.py.
--
-- Called by BM25Retriever with the query's analysed terms (at most 16; a longer query is
-- ranked exhaustively), k1, b and k; returns the k best chunks of the collection by exact
-- Okapi BM25. Step 1 (when the best term is frequent) scores the chunks holding its
-- highest-bound terms, which gives a first k-th score θ; step 2 fetches, through GIN, the
-- chunks holding sets of terms whose bounds still reach θ, scoring each from its own row
-- of term frequencies and raising θ as it goes; step 3 reads the posting lists of the
-- single terms whose bound alone still reaches θ. Constants: 1000 postings per result
-- wanted before step 1 runs (the setting retrieval.bm25_pilot_df_per_k overrides it), term
-- sets of at most 8 terms in step 2, score expressions of 4, 8 or 16 term slots.
--
-- With a scope (p_scope, from retrieval_bm25_scope_query: chunk marks that express the
-- scope exactly), it ranks the scope's chunks alone: the scope is ANDed into every GIN
-- look-up, and a term's postings are read as the GIN look-up of its lexeme and the scope
-- (0026). The bounds stay the collection's, θ comes from the scope's chunks.
--
-- With a declared scope (p_indexed: its marks, the predicate of a partial GIN index of its
-- chunks' lexemes that declaring it built), every look-up also holds those marks, and the
-- statements are planned for the call with them as a constant, which the planner matches to
-- that index's predicate: the look-ups then read the scope's own, smaller index (0028).

CREATE OR REPLACE FUNCTION retrieval_bm25_top_k(
    p_collection bigint, p_terms text[], p_k1 float8, p_b float8, p_k integer,
    p_scope tsquery DEFAULT NULL, p_indexed tsquery DEFAULT NULL
) RETURNS TABLE (chunk_id bigint, score float8) LANGUAGE plpgsql STABLE
-- Each statement is planned once per connection (planning cost more than running it),
-- so its plan must not depend on how big the tables were then: index look-ups, always
-- (planned per call under a declared scope's index, below).
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
DECLARE
    v_a float8;
    v_b float8;
    v_n bigint;
    v_terms text[];     -- the query's terms, by decreasing bound
    v_weights float8[]; -- qtf · idf
    v_dfs bigint[];     -- their document frequencies
    v_bounds float8[];  -- the most a term adds to any chunk's score
    v_lows float8[];    -- the most it adds to a chunk holding it once
    v_lexemes text[];   -- the terms as quoted tsquery lexemes
    v_repeats text[];   -- the lexemes of chunks holding them more than once
    v_count integer;
    v_pilot integer;        -- step 1 looks at this many highest-bound terms
    v_covered integer := 0; -- and scores every chunk holding this many of them (0: none)
    v_depth integer;        -- step 2's term sets grow to this size at most
    v_theta float8 := 0;
    v_suffix float8[];
    v_clauses tsquery[] := '{}';
    v_ids bigint[] := '{}';
    v_scores float8[] := '{}';
    -- Step 2's search: a stack of term sets (as a tsquery), their last term, size, bounds.
    v_queries text[];
    v_lasts integer[];
    v_sizes integer[];
    v_sums float8[];
    v_query text;
    v_last integer;
    v_size integer;
    v_sum float8;
    v_rest float8;
    v_repeated integer;
    v_bound float8;
    v_lexeme text;
    v_partners text[];
    v_scoped boolean := p_scope IS NOT NULL;
    v_scope tsquery := coalesce(p_scope, ''::tsquery);  -- q && '' is q
    v_indexed tsquery := CASE WHEN p_scope IS NOT NULL THEN p_indexed END;
BEGIN
    IF v_indexed IS NOT NULL THEN
        -- A declared scope's own GIN index serves a look-up whose plan holds its marks as
        -- a constant: this call's statements are planned with their values.
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
        IF p_scope = v_indexed THEN
            v_scope := ''::tsquery;  -- the scope is the index's marks, checked below
        END IF;
    END IF;
    SELECT p_k1 * (1 - p_b), p_k1 * p_b * s.chunk_count / greatest(s.total_length, 1),
           s.chunk_count
        INTO v_a, v_b, v_n
        FROM retrieval_bm25_stats s WHERE s.collection_id = p_collection;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT array_agg(x.term ORDER BY x.bound DESC, x.term),
           array_agg(x.w ORDER BY x.bound DESC, x.term),
           array_agg(x.bound ORDER BY x.bound DESC, x.term),
           array_agg(x.low ORDER BY x.bound DESC, x.term),
           array_agg(x.df ORDER BY x.bound DESC, x.term)
        INTO v_terms, v_weights, v_bounds, v_lows, v_dfs
        FROM (
            SELECT t.term, w.w, t.df,
                   w.w / (1 + v_a / t.max_tf + v_b * t.min_dl_per_tf) * (1 + 1e-9) AS bound,
                   w.w / (1 + v_a + v_b * t.min_dl_at_tf1) * (1 + 1e-9) AS low
            FROM (SELECT u.term, count(*) AS qtf FROM unnest(p_terms) AS u(term)
                  GROUP BY u.term) AS qt
            CROSS JOIN LATERAL (
                SELECT t.term, t.df, t.max_tf, t.min_dl_per_tf, t.min_dl_at_tf1
                FROM retrieval_bm25_term t
                WHERE t.collection_id = p_collection AND t.term = qt.term OFFSET 0
            ) AS t
            CROSS JOIN LATERAL (
                SELECT (qt.qtf * ln(1 + (v_n - t.df + 0.5) / (t.df + 0.5)))::float8 AS w
            ) AS w
        ) AS x;
    v_count := coalesce(array_length(v_terms, 1), 0);
    IF v_count = 0 THEN
        RETURN;
    END IF;
    v_lexemes := ARRAY(
        SELECT '''' || replace(replace(p_collection || ':' || t, '\', '\\'), '''', '''''') || ''''
        FROM unnest(v_terms) AS t
    );
    v_repeats := ARRAY(
        SELECT '''' || replace(replace(p_collection || '+:' || t, '\', '\\'), '''', '''''') || ''''
        FROM unnest(v_terms) AS t
    );
    v_pilot := least(v_count, 4);
    IF v_scoped AND EXISTS (SELECT 1 FROM unnest(v_terms) AS t WHERE octet_length(t) > 1000) THEN
        RAISE EXCEPTION 'a scoped ranking finds chunks by lexemes, and a term over 1000 bytes has none';
    END IF;
    IF v_count > 16
       OR EXISTS (SELECT 1 FROM unnest(v_terms) AS t WHERE octet_length(t) > 1000) THEN
        v_pilot := 0;  -- too many terms to score a row, or one without a lexeme: exhaustive
    ELSIF v_count > 1 AND v_dfs[1] > p_k * coalesce(nullif(
            current_setting('retrieval.bm25_pilot_df_per_k', true), '')::integer, 1000) THEN
        -- 1. θ from the chunks holding three of the (up to) four highest-bound terms
        --    (both, for a query of two), scored, when even the highest-bound term is
        --    frequent; else its postings give θ sooner (below).
        v_covered := least(v_pilot, 3);
        v_clauses := ARRAY(
            SELECT string_agg(v_lexemes[i], ' & ' ORDER BY i)::tsquery && v_scope
            FROM generate_series(1, (1 << v_pilot) - 1) AS s(mask)
            CROSS JOIN generate_series(1, v_pilot) AS i
            WHERE s.mask & (1 << (i - 1)) <> 0
            GROUP BY s.mask HAVING count(*) = v_covered);
IF v_count <= 4 THEN
        SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.s), '{}')
            INTO v_ids, v_scores
            FROM (SELECT d.chunk_id AS id, (coalesce(v_weights[1] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[1])::integer), 0)
 + coalesce(v_weights[2] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[2])::integer), 0)
 + coalesce(v_weights[3] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[3])::integer), 0)
 + coalesce(v_weights[4] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[4])::integer), 0)) AS s FROM retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
                  WHERE d.lexemes @@ ANY(v_clauses)
                    AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                    AND d.collection_id = p_collection) AS x;
ELSIF v_count <= 8 THEN
        SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.s), '{}')
            INTO v_ids, v_scores
            FROM (SELECT d.chunk_id AS id, (coalesce(v_weights[1] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[1])::integer), 0)
 + coalesce(v_weights[2] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[2])::integer), 0)
 + coalesce(v_weights[3] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[3])::integer), 0)
 + coalesce(v_weights[4] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[4])::integer), 0)
 + coalesce(v_weights[5] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[5])::integer), 0)
 + coalesce(v_weights[6] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[6])::integer), 0)
 + coalesce(v_weights[7] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[7])::integer), 0)
 + coalesce(v_weights[8] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[8])::integer), 0)) AS s FROM retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
                  WHERE d.lexemes @@ ANY(v_clauses)
                    AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                    AND d.collection_id = p_collection) AS x;
ELSE
        SELECT coalesce(array_agg(x.id), '{}'), coalesce(array_agg(x.s), '{}')
            INTO v_ids, v_scores
            FROM (SELECT d.chunk_id AS id, (coalesce(v_weights[1] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[1])::integer), 0)
 + coalesce(v_weights[2] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[2])::integer), 0)
 + coalesce(v_weights[3] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[3])::integer), 0)
 + coalesce(v_weights[4] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[4])::integer), 0)
 + coalesce(v_weights[5] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[5])::integer), 0)
 + coalesce(v_weights[6] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[6])::integer), 0)
 + coalesce(v_weights[7] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[7])::integer), 0)
 + coalesce(v_weights[8] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[8])::integer), 0)
 + coalesce(v_weights[9] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[9])::integer), 0)
 + coalesce(v_weights[10] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[10])::integer), 0)
 + coalesce(v_weights[11] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[11])::integer), 0)
 + coalesce(v_weights[12] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[12])::integer), 0)
 + coalesce(v_weights[13] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[13])::integer), 0)
 + coalesce(v_weights[14] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[14])::integer), 0)
 + coalesce(v_weights[15] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[15])::integer), 0)
 + coalesce(v_weights[16] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[16])::integer), 0)) AS s FROM retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
                  WHERE d.lexemes @@ ANY(v_clauses)
                    AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                    AND d.collection_id = p_collection) AS x;
END IF;
        SELECT greatest(v_theta, (SELECT y.s FROM (SELECT max(x.s) AS s
                                  FROM unnest(v_ids, v_scores) AS x(id, s) GROUP BY x.id) AS y
                              ORDER BY y.s DESC OFFSET p_k - 1 LIMIT 1)) INTO v_theta;
    END IF;
    IF v_theta <= 0 AND v_pilot > 0 THEN
        -- No step 1, or fewer than k such chunks: a posting's contribution is a lower
        -- bound of its chunk's score too, so the highest-bound term's postings give θ.
        IF cardinality(v_ids) = 0 THEN  -- one posting per chunk: nothing to merge
            SELECT coalesce((SELECT y.s FROM (
                        SELECT v_weights[1] * p.tf / (p.tf + v_a + v_b * p.dl) AS s
                        FROM (SELECT p.tf, p.dl FROM retrieval_bm25_posting p
                              WHERE NOT v_scoped AND p.collection_id = p_collection
                                AND p.term = v_terms[1]
                              UNION ALL
                              SELECT (d.tfs -> v_terms[1])::integer, d.dl FROM retrieval_bm25_chunk d
                              WHERE v_scoped AND d.lexemes @@ (v_lexemes[1]::tsquery && v_scope)
                                AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                                AND d.collection_id = p_collection) AS p) AS y
                    ORDER BY y.s DESC OFFSET p_k - 1 LIMIT 1), 0)
                INTO v_theta;
        ELSE
        SELECT coalesce((SELECT y.s FROM (
                    SELECT max(x.s) AS s
                    FROM (SELECT u.id, u.s FROM unnest(v_ids, v_scores) AS u(id, s)
                          UNION ALL
                          SELECT p.chunk_id, q.w * p.tf / (p.tf + v_a + v_b * p.dl)
                          FROM unnest(v_terms[1:1], v_weights[1:1], v_lexemes[1:1]) AS q(term, w, lexeme)
                          CROSS JOIN LATERAL (SELECT p.chunk_id, p.tf, p.dl FROM retrieval_bm25_posting p
                  WHERE NOT v_scoped AND p.collection_id = p_collection AND p.term = q.term
                  UNION ALL
                  SELECT d.chunk_id, (d.tfs -> q.term)::integer, d.dl FROM retrieval_bm25_chunk d
                  WHERE v_scoped AND d.lexemes @@ (q.lexeme::tsquery && v_scope)
                    AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                    AND d.collection_id = p_collection OFFSET 0) AS p) AS x(id, s)
                    GROUP BY x.id) AS y
                ORDER BY y.s DESC OFFSET p_k - 1 LIMIT 1), 0)
            INTO v_theta;
        END IF;
    END IF;
    IF v_count > 1 AND (v_theta > 0 OR v_count <= v_pilot) THEN
        -- 2. Every chunk holding two or more terms that can reach θ. A term a chunk holds
        --    once adds at most its tf-1 bound (``v_lows``), one it holds more than once
        --    (its ``+`` lexeme) at most its bound. A search over term sets, each term
        --    once or repeated, in the order of the query's terms: a set's chunks are
        --    fetched and scored once its bounds reach θ (unless step 1 scored them); it
        --    grows by a later term while its bounds and the full bounds of every term
        --    after can; at the largest size, every such set is fetched. The set a chunk
        --    holds is found on the way, highest bounds first, so θ rises as it goes.
        v_depth := CASE WHEN v_count <= 8 THEN v_count ELSE 2 END;
        v_suffix := ARRAY(SELECT sum(b) OVER (ORDER BY i DESC)
                          FROM unnest(v_bounds) WITH ORDINALITY AS u(b, i) ORDER BY i) || 0::float8;
        -- The search starts from the empty set (whose chunks are not fetched).
        v_queries := '{""}';
        v_lasts := '{0}';
        v_sizes := '{0}';
        v_sums := '{0}';
        WHILE cardinality(v_lasts) > 0 LOOP
            v_query := v_queries[cardinality(v_queries)];
            v_last := v_lasts[cardinality(v_lasts)];
            v_size := v_sizes[cardinality(v_sizes)];
            v_sum := v_sums[cardinality(v_sums)];
            v_queries := v_queries[1 : cardinality(v_queries) - 1];
            v_lasts := v_lasts[1 : cardinality(v_lasts) - 1];
            v_sizes := v_sizes[1 : cardinality(v_sizes) - 1];
            v_sums := v_sums[1 : cardinality(v_sums) - 1];
            v_partners := '{}';
            -- Later terms pushed first, so the highest bounds come off the stack first.
            FOR j IN REVERSE v_count .. v_last + 1 LOOP
                v_rest := CASE WHEN v_size + 1 = v_depth THEN v_suffix[j + 1] ELSE 0 END;
                FOR v_repeated IN 0 .. 1 LOOP
                    v_bound := CASE v_repeated WHEN 0 THEN v_lows[j] ELSE v_bounds[j] END;
                    v_lexeme := CASE v_repeated WHEN 0 THEN v_lexemes[j] ELSE v_repeats[j] END;
                    IF v_size > 0 AND v_sum + v_bound + v_rest >= v_theta THEN
                        IF v_covered = 0 OR j > v_pilot OR v_size + 1 < v_covered THEN
                            v_partners := v_partners || v_lexeme;
                        END IF;  -- else step 1 scored the set's chunks
                        EXIT;  -- the term's own lexeme finds it repeated too
                    ELSIF v_size + 1 < v_depth
                          AND v_sum + v_bound + v_suffix[j + 1] >= v_theta THEN
                        v_queries := v_queries || CASE WHEN v_size = 0 THEN v_lexeme
                                                       ELSE v_query || ' & ' || v_lexeme END;
                        v_lasts := v_lasts || j;
                        v_sizes := v_sizes || (v_size + 1);
                        v_sums := v_sums || (v_sum + v_bound);
                    END IF;
                END LOOP;
            END LOOP;
            IF cardinality(v_partners) > 0 THEN
IF v_count <= 4 THEN
                -- Scored now, so θ rises before the next (lower-bound) sets are weighed;
                -- the chunks scoring below the new θ are dropped.
                WITH s AS MATERIALIZED (
                    SELECT x.id, max(x.s) AS s
                    FROM (SELECT u.id, u.s FROM unnest(v_ids, v_scores) AS u(id, s)
                          UNION ALL
                          SELECT d.chunk_id, (coalesce(v_weights[1] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[1])::integer), 0)
 + coalesce(v_weights[2] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[2])::integer), 0)
 + coalesce(v_weights[3] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[3])::integer), 0)
 + coalesce(v_weights[4] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[4])::integer), 0)) FROM retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
                          WHERE d.lexemes @@ ((v_query || ' & ('
                                    || array_to_string(v_partners, ' | ') || ')')::tsquery && v_scope)
                            AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                            AND d.collection_id = p_collection) AS x(id, s)
                    GROUP BY x.id
                ), t AS MATERIALIZED (
                    SELECT greatest(v_theta, (SELECT s.s FROM s ORDER BY s.s DESC
                                              OFFSET p_k - 1 LIMIT 1)) AS theta
                )
                SELECT coalesce(array_agg(s.id), '{}'), coalesce(array_agg(s.s), '{}'),
                       (SELECT t.theta FROM t)
                    INTO v_ids, v_scores, v_theta
                    FROM s WHERE s.s >= (SELECT t.theta FROM t);
ELSIF v_count <= 8 THEN
                -- Scored now, so θ rises before the next (lower-bound) sets are weighed;
                -- the chunks scoring below the new θ are dropped.
                WITH s AS MATERIALIZED (
                    SELECT x.id, max(x.s) AS s
                    FROM (SELECT u.id, u.s FROM unnest(v_ids, v_scores) AS u(id, s)
                          UNION ALL
                          SELECT d.chunk_id, (coalesce(v_weights[1] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[1])::integer), 0)
 + coalesce(v_weights[2] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[2])::integer), 0)
 + coalesce(v_weights[3] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[3])::integer), 0)
 + coalesce(v_weights[4] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[4])::integer), 0)
 + coalesce(v_weights[5] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[5])::integer), 0)
 + coalesce(v_weights[6] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[6])::integer), 0)
 + coalesce(v_weights[7] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[7])::integer), 0)
 + coalesce(v_weights[8] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[8])::integer), 0)) FROM retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
                          WHERE d.lexemes @@ ((v_query || ' & ('
                                    || array_to_string(v_partners, ' | ') || ')')::tsquery && v_scope)
                            AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                            AND d.collection_id = p_collection) AS x(id, s)
                    GROUP BY x.id
                ), t AS MATERIALIZED (
                    SELECT greatest(v_theta, (SELECT s.s FROM s ORDER BY s.s DESC
                                              OFFSET p_k - 1 LIMIT 1)) AS theta
                )
                SELECT coalesce(array_agg(s.id), '{}'), coalesce(array_agg(s.s), '{}'),
                       (SELECT t.theta FROM t)
                    INTO v_ids, v_scores, v_theta
                    FROM s WHERE s.s >= (SELECT t.theta FROM t);
ELSE
                -- Scored now, so θ rises before the next (lower-bound) sets are weighed;
                -- the chunks scoring below the new θ are dropped.
                WITH s AS MATERIALIZED (
                    SELECT x.id, max(x.s) AS s
                    FROM (SELECT u.id, u.s FROM unnest(v_ids, v_scores) AS u(id, s)
                          UNION ALL
                          SELECT d.chunk_id, (coalesce(v_weights[1] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[1])::integer), 0)
 + coalesce(v_weights[2] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[2])::integer), 0)
 + coalesce(v_weights[3] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[3])::integer), 0)
 + coalesce(v_weights[4] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[4])::integer), 0)
 + coalesce(v_weights[5] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[5])::integer), 0)
 + coalesce(v_weights[6] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[6])::integer), 0)
 + coalesce(v_weights[7] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[7])::integer), 0)
 + coalesce(v_weights[8] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[8])::integer), 0)
 + coalesce(v_weights[9] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[9])::integer), 0)
 + coalesce(v_weights[10] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[10])::integer), 0)
 + coalesce(v_weights[11] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[11])::integer), 0)
 + coalesce(v_weights[12] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[12])::integer), 0)
 + coalesce(v_weights[13] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[13])::integer), 0)
 + coalesce(v_weights[14] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[14])::integer), 0)
 + coalesce(v_weights[15] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[15])::integer), 0)
 + coalesce(v_weights[16] / (1 + (v_a + v_b * d.dl) / (t.tfs -> v_terms[16])::integer), 0)) FROM retrieval_bm25_chunk d
CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t
                          WHERE d.lexemes @@ ((v_query || ' & ('
                                    || array_to_string(v_partners, ' | ') || ')')::tsquery && v_scope)
                            AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                            AND d.collection_id = p_collection) AS x(id, s)
                    GROUP BY x.id
                ), t AS MATERIALIZED (
                    SELECT greatest(v_theta, (SELECT s.s FROM s ORDER BY s.s DESC
                                              OFFSET p_k - 1 LIMIT 1)) AS theta
                )
                SELECT coalesce(array_agg(s.id), '{}'), coalesce(array_agg(s.s), '{}'),
                       (SELECT t.theta FROM t)
                    INTO v_ids, v_scores, v_theta
                    FROM s WHERE s.s >= (SELECT t.theta FROM t);
END IF;
            END IF;
        END LOOP;
    ELSIF v_count > v_pilot THEN
        -- Too few chunks share terms to bound the others: every posting is read.
        RETURN QUERY
            SELECT p.chunk_id, sum(q.w * p.tf / (p.tf + v_a + v_b * p.dl)) AS score
            FROM unnest(v_terms, v_weights, v_lexemes) AS q(term, w, lexeme)
            CROSS JOIN LATERAL (SELECT p.chunk_id, p.tf, p.dl FROM retrieval_bm25_posting p
                  WHERE NOT v_scoped AND p.collection_id = p_collection AND p.term = q.term
                  UNION ALL
                  SELECT d.chunk_id, (d.tfs -> q.term)::integer, d.dl FROM retrieval_bm25_chunk d
                  WHERE v_scoped AND d.lexemes @@ (q.lexeme::tsquery && v_scope)
                    AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                    AND d.collection_id = p_collection OFFSET 0) AS p
            GROUP BY p.chunk_id
            ORDER BY score DESC, p.chunk_id
            LIMIT p_k;
        RETURN;
    END IF;
    -- 3. Every chunk holding two query terms that can reach θ is scored. One holding a
    --    single term scores that term's contribution: only the terms whose bound reaches
    --    θ are read, and only their postings that reach it kept. A chunk holding more
    --    terms may come up here with a partial score, below its exact one: the best
    --    k + (scored chunks × terms) entries hold every top-k chunk with its exact score.
    RETURN QUERY
        SELECT x.id, max(x.s) AS score
        FROM (SELECT y.id, y.s
              FROM (SELECT u.id, u.s FROM unnest(v_ids, v_scores) AS u(id, s)
                    UNION ALL
                    SELECT p.chunk_id, q.w * p.tf / (p.tf + v_a + v_b * p.dl)
                    FROM unnest(v_terms, v_weights, v_bounds, v_lexemes) AS q(term, w, u, lexeme)
                    CROSS JOIN LATERAL (SELECT p.chunk_id, p.tf, p.dl FROM retrieval_bm25_posting p
                  WHERE NOT v_scoped AND p.collection_id = p_collection AND p.term = q.term
                  UNION ALL
                  SELECT d.chunk_id, (d.tfs -> q.term)::integer, d.dl FROM retrieval_bm25_chunk d
                  WHERE v_scoped AND d.lexemes @@ (q.lexeme::tsquery && v_scope)
                    AND (v_indexed IS NULL OR d.lexemes @@ v_indexed)
                    AND d.collection_id = p_collection OFFSET 0) AS p
                    WHERE q.u >= v_theta
                      AND q.w * p.tf / (p.tf + v_a + v_b * p.dl) >= v_theta) AS y
              ORDER BY y.s DESC
              LIMIT p_k + cardinality(v_ids) * v_count) AS x
        GROUP BY x.id
        ORDER BY score DESC, x.id
        LIMIT p_k;
END $$;
