-- The BM25 index's bookkeeping, kept exact in the writing transaction (the current
-- definitions; migrations 0002, 0006, 0010 and 0011 created them, 0025 changed one).
--
-- Postings (retrieval_bm25_posting: term, chunk, tf, dl) are written and deleted by
-- services/sparse/index.py; these triggers keep, per collection, each term's document
-- frequency and score bounds (retrieval_bm25_term), the chunk count and total length
-- (retrieval_bm25_stats) and each chunk's own row of term frequencies and lexemes
-- (retrieval_bm25_chunk), and serialise writers of one collection (an advisory lock),
-- so concurrent ingests never deadlock on the shared rows. A chunk's row also holds its
-- scope marks (bm25_scope_marks.sql).

CREATE OR REPLACE FUNCTION retrieval_bm25_postings_added()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- Sorted, so concurrent writers lock shared term rows in one order (no deadlock).
    INSERT INTO retrieval_bm25_term AS t (collection_id, term, df, max_tf, min_dl_per_tf,
                                          min_dl_at_tf1)
        SELECT collection_id, term, count(*), max(tf), min(dl::float8 / tf), coalesce(min(dl) FILTER (WHERE tf = 1), 2147483647)
        FROM added GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (collection_id, term) DO UPDATE
        SET df = t.df + EXCLUDED.df,
            max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
            min_dl_per_tf = least(t.min_dl_per_tf, EXCLUDED.min_dl_per_tf),
            min_dl_at_tf1 = least(t.min_dl_at_tf1, EXCLUDED.min_dl_at_tf1);
    INSERT INTO retrieval_bm25_stats AS s (collection_id, chunk_count, total_length)
        SELECT collection_id, count(*), sum(dl)
        FROM (SELECT DISTINCT collection_id, chunk_id, dl FROM added) AS chunks GROUP BY 1 ORDER BY 1
        ON CONFLICT (collection_id) DO UPDATE
        SET chunk_count = s.chunk_count + EXCLUDED.chunk_count,
            total_length = s.total_length + EXCLUDED.total_length;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_postings_removed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    WITH gone AS (SELECT collection_id, term, count(*) AS n FROM removed GROUP BY 1, 2 ORDER BY 1, 2)
    UPDATE retrieval_bm25_term AS t SET df = t.df - gone.n
        FROM gone WHERE t.collection_id = gone.collection_id AND t.term = gone.term;
    DELETE FROM retrieval_bm25_term AS t USING (SELECT DISTINCT collection_id, term FROM removed) AS r
        WHERE t.collection_id = r.collection_id AND t.term = r.term AND t.df <= 0;
    WITH chunks AS (
        SELECT collection_id, count(*) AS n, sum(dl) AS length
        FROM (SELECT DISTINCT collection_id, chunk_id, dl FROM removed) AS c GROUP BY 1 ORDER BY 1
    )
    UPDATE retrieval_bm25_stats AS s
        SET chunk_count = s.chunk_count - chunks.n, total_length = s.total_length - chunks.length
        FROM chunks WHERE s.collection_id = chunks.collection_id;
    DELETE FROM retrieval_bm25_stats WHERE chunk_count <= 0;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_chunk_terms_added()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- A chunk's terms, then its scope marks (bm25_scope_marks.sql), read from its row.
    INSERT INTO retrieval_bm25_chunk AS c (chunk_id, collection_id, dl, tfs, lexemes)
        SELECT a.chunk_id, a.collection_id, a.dl, a.tfs, a.lexemes || array_to_tsvector(
            coalesce((SELECT retrieval_bm25_marks(k.collection_id, k.document_id, k.access,
                                                  k.metadata)
                      FROM retrieval_chunk k WHERE k.id = a.chunk_id), '{}'))
        FROM (SELECT chunk_id, collection_id, max(dl) AS dl, jsonb_object_agg(term, tf) AS tfs,
                     array_to_tsvector(
        coalesce(array_agg(collection_id || ':' || term)
                     FILTER (WHERE octet_length(term) <= 1000), '{}')
        || coalesce(array_agg(collection_id || '+:' || term)
                        FILTER (WHERE tf > 1 AND octet_length(term) <= 1000), '{}')) AS lexemes
              FROM added GROUP BY chunk_id, collection_id) AS a
        ORDER BY a.chunk_id
        ON CONFLICT (chunk_id) DO UPDATE
        SET dl = EXCLUDED.dl, tfs = c.tfs || EXCLUDED.tfs, lexemes = c.lexemes || EXCLUDED.lexemes;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_chunk_terms_removed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- Chunks that lost every term go; the others (a partial rewrite) lose those terms.
    DELETE FROM retrieval_bm25_chunk AS c
        USING (SELECT chunk_id, count(*) AS n FROM removed GROUP BY chunk_id) AS g
        WHERE c.chunk_id = g.chunk_id AND g.n >= (SELECT count(*) FROM jsonb_object_keys(c.tfs));
    UPDATE retrieval_bm25_chunk AS c
        SET tfs = c.tfs - g.terms, lexemes = ts_delete(c.lexemes, g.lexemes)
        FROM (SELECT chunk_id, array_agg(term) AS terms,
                     array_agg(collection_id || ':' || term)
                         || array_agg(collection_id || '+:' || term) AS lexemes
              FROM removed GROUP BY chunk_id) AS g
        WHERE c.chunk_id = g.chunk_id;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_chunks_deleted()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM retrieval_bm25_posting AS p USING deleted WHERE p.chunk_id = deleted.id;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_chunks_truncated()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    TRUNCATE retrieval_bm25_posting, retrieval_bm25_term, retrieval_bm25_stats, retrieval_bm25_chunk;
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_lock_collections()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock(1919053106, (id % 2147483647)::int)
        FROM (SELECT DISTINCT collection_id FROM changed ORDER BY 1) AS c(id);
    RETURN NULL;
END $function$;

CREATE TRIGGER retrieval_bm25_postings_added AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_postings_added();
CREATE TRIGGER retrieval_bm25_postings_removed AFTER DELETE ON retrieval_bm25_posting
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_postings_removed();
CREATE TRIGGER retrieval_bm25_chunk_terms_added AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_chunk_terms_added();
CREATE TRIGGER retrieval_bm25_chunk_terms_removed AFTER DELETE ON retrieval_bm25_posting
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_chunk_terms_removed();
CREATE TRIGGER retrieval_bm25_chunks_deleted AFTER DELETE ON retrieval_chunk
    REFERENCING OLD TABLE AS deleted FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_chunks_deleted();
CREATE TRIGGER retrieval_bm25_chunks_truncated AFTER TRUNCATE ON retrieval_chunk
    FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_chunks_truncated();
CREATE TRIGGER retrieval_bm25_lock_on_add AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_lock_collections();
CREATE TRIGGER retrieval_bm25_lock_on_remove AFTER DELETE ON retrieval_bm25_posting
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_lock_collections();
