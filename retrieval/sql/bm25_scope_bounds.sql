-- The BM25 term bounds of each declared scope (the current definitions; migration 0028
-- created them). DRAFT: not applied by any migration yet, not tested.
--
-- A scope a site declares (Collection.scope_indexes: an access token, or a metadata
-- object) is kept in retrieval_bm25_scope: its declaration as JSON text, sorted keys (the
-- key of its bounds), and its marks' tsquery (retrieval_bm25_scope_query without terms),
-- which its chunks' rows match. retrieval_bm25_scope_term holds, for every term of the
-- scope's chunks, its largest tf, smallest dl / tf and shortest chunk holding it once among
-- those chunks (and how many hold it, or more: deletions leave it): the top-k function ranks a
-- scope with these bounds (p_bounds) where the collection's are looser. A term without a
-- row is in none of the scope's chunks.
--
-- The bounds only rise: a chunk written, or moved into the scope (its access or metadata
-- changed), raises them in the writing transaction; one deleted or moved out leaves them
-- as they were, still upper bounds. Declaring a scope fills its rows under the
-- collection's writer lock (retrieval_bm25_lock_collections), so no write is missed.

CREATE OR REPLACE FUNCTION retrieval_bm25_scope_bounds_fill(p_collection bigint, p_scope text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock(1919053106, (p_collection % 2147483647)::int);
    DELETE FROM retrieval_bm25_scope_term WHERE collection_id = p_collection AND scope = p_scope;
    INSERT INTO retrieval_bm25_scope_term (collection_id, scope, term, df, max_tf,
                                           min_dl_per_tf, min_dl_at_tf1)
        SELECT p_collection, p_scope, e.key, count(*), max(e.value::integer),
               min(d.dl::float8 / e.value::integer),
               coalesce(min(d.dl) FILTER (WHERE e.value::integer = 1), 2147483647)
        FROM retrieval_bm25_chunk d
        CROSS JOIN LATERAL jsonb_each_text(d.tfs) AS e
        WHERE d.collection_id = p_collection
          AND d.lexemes @@ (SELECT s.marks::tsquery FROM retrieval_bm25_scope s
                            WHERE s.collection_id = p_collection AND s.scope = p_scope)
        GROUP BY e.key;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_scope_terms_added()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM retrieval_bm25_scope) THEN
        RETURN NULL;  -- no scope declared anywhere: nothing to raise
    END IF;
    -- After retrieval_bm25_chunk_terms_added (trigger names sort so): the chunks' rows
    -- hold their marks. Sorted, as the term rows are, so writers lock in one order.
    INSERT INTO retrieval_bm25_scope_term AS t (collection_id, scope, term, df, max_tf,
                                                min_dl_per_tf, min_dl_at_tf1)
        SELECT s.collection_id, s.scope, a.term, count(*), max(a.tf),
               min(a.dl::float8 / a.tf),
               coalesce(min(a.dl) FILTER (WHERE a.tf = 1), 2147483647)
        FROM added a
        JOIN retrieval_bm25_scope s ON s.collection_id = a.collection_id
        JOIN retrieval_bm25_chunk d ON d.chunk_id = a.chunk_id
        WHERE d.lexemes @@ s.marks::tsquery
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (collection_id, scope, term) DO UPDATE
        SET df = t.df + EXCLUDED.df,
            max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
            min_dl_per_tf = least(t.min_dl_per_tf, EXCLUDED.min_dl_per_tf),
            min_dl_at_tf1 = least(t.min_dl_at_tf1, EXCLUDED.min_dl_at_tf1);
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_scope_marks_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- After retrieval_bm25_chunk_marks_changed: a chunk now in a declared scope it was
    -- not in before raises the scope's bounds of its terms.
    INSERT INTO retrieval_bm25_scope_term AS t (collection_id, scope, term, df, max_tf,
                                                min_dl_per_tf, min_dl_at_tf1)
        SELECT s.collection_id, s.scope, e.key, 1, e.value::integer,
               d.dl::float8 / e.value::integer,
               CASE WHEN e.value::integer = 1 THEN d.dl ELSE 2147483647 END
        FROM retrieval_bm25_chunk d
        JOIN retrieval_bm25_scope s ON s.collection_id = d.collection_id
        CROSS JOIN LATERAL jsonb_each_text(d.tfs) AS e
        WHERE d.chunk_id = NEW.id AND d.lexemes @@ s.marks::tsquery
          -- (a scope's marks name its collection: a chunk from another was in none)
          AND NOT array_to_tsvector(retrieval_bm25_marks(OLD.collection_id, OLD.document_id,
                                                         OLD.access, OLD.metadata))
                  @@ s.marks::tsquery
        ORDER BY 1, 2, 3
        ON CONFLICT (collection_id, scope, term) DO UPDATE
        SET df = t.df + EXCLUDED.df,
            max_tf = greatest(t.max_tf, EXCLUDED.max_tf),
            min_dl_per_tf = least(t.min_dl_per_tf, EXCLUDED.min_dl_per_tf),
            min_dl_at_tf1 = least(t.min_dl_at_tf1, EXCLUDED.min_dl_at_tf1);
    RETURN NULL;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_scope_terms_truncated()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    TRUNCATE retrieval_bm25_scope_term;  -- no chunk left: no term in any scope
    RETURN NULL;
END $function$;

CREATE TRIGGER retrieval_bm25_scope_terms_added AFTER INSERT ON retrieval_bm25_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_scope_terms_added();
CREATE TRIGGER retrieval_bm25_scope_marks_changed
    AFTER UPDATE OF collection_id, document_id, access, metadata ON retrieval_chunk FOR EACH ROW
    WHEN (((old.collection_id IS DISTINCT FROM new.collection_id) OR (old.document_id IS DISTINCT FROM new.document_id) OR (old.access IS DISTINCT FROM new.access) OR (old.metadata IS DISTINCT FROM new.metadata)))
    EXECUTE FUNCTION retrieval_bm25_scope_marks_changed();
CREATE TRIGGER retrieval_bm25_scope_terms_truncated AFTER TRUNCATE ON retrieval_chunk
    FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_bm25_scope_terms_truncated();
