-- Each chunk's scope marks in its BM25 row (the current definitions; migration 0025
-- created them, 0026 marks array elements as such): besides its terms,
-- retrieval_bm25_chunk.lexemes holds one lexeme for its document, one for each access
-- token of its copy of the document's visibility (retrieval_chunk.access) and one for
-- each leaf of its metadata (the path to a scalar, of keys and array steps '[]', and the
-- scalar, numbers in canonical form), each '<collection>#' || md5(kind || value).
--
-- A scoped search (services/sparse/scoped.py) then asks the chunks' GIN index for the
-- scope's chunks holding a query term in one query, the scope a clause beside the terms
-- (retrieval_bm25_scope_query), so a narrow scope reads neither every posting of the
-- terms nor every row of the scope. Every chunk a scope allows holds the scope's marks
-- (a metadata filter's leaves are among the leaves of any metadata containing it), so
-- the marks find a superset; each result is checked against the scope's exact
-- conditions. The superset is the scope itself when the metadata filter holds no empty
-- object or array and no object or array inside an array (each of its leaves is then
-- contained on its own), so such a scope can be ANDed into the top-k function's
-- look-ups (0026). The marks follow the chunk row in the writing transaction: a row written
-- from its postings takes its chunk's, and a chunk whose document, access or metadata
-- changes rewrites them.

CREATE OR REPLACE FUNCTION retrieval_bm25_metadata_leaves(p_metadata jsonb)
 RETURNS SETOF text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    WITH RECURSIVE walk(path, value) AS (
        SELECT '', p_metadata
        UNION ALL
        SELECT w.path || e.step, e.value
        FROM walk w
        CROSS JOIN LATERAL (
            SELECT '.' || to_jsonb(o.key)::text, o.value
            FROM jsonb_each(CASE jsonb_typeof(w.value) WHEN 'object' THEN w.value END) AS o
            UNION ALL
            SELECT '[]', a.value
            FROM jsonb_array_elements(CASE jsonb_typeof(w.value) WHEN 'array' THEN w.value END) AS a
        ) AS e(step, value)
    )
    SELECT DISTINCT w.path || '=' || CASE jsonb_typeof(w.value)
                                        WHEN 'number' THEN trim_scale(w.value::numeric)::text
                                        ELSE w.value::text END
    FROM walk w WHERE jsonb_typeof(w.value) NOT IN ('object', 'array')
$function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_marks(
    p_collection bigint, p_document bigint, p_access jsonb, p_metadata jsonb
) RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT coalesce(array_agg(DISTINCT p_collection || '#' || md5(m.mark)), '{}')
    FROM (SELECT 'd' || p_document WHERE p_document IS NOT NULL
          UNION ALL
          SELECT 'a' || t
          FROM jsonb_array_elements_text(CASE jsonb_typeof(p_access) WHEN 'array' THEN p_access END) AS t
          UNION ALL
          SELECT 'm' || l FROM retrieval_bm25_metadata_leaves(p_metadata) AS l) AS m(mark)
    WHERE p_collection IS NOT NULL
$function$;

-- The chunks holding one of the terms and the scope's marks: one of the documents, one
-- of the access tokens, every leaf of the metadata filter (a NULL or empty part: not
-- marked, the exact check alone applies).
CREATE OR REPLACE FUNCTION retrieval_bm25_scope_query(
    p_collection bigint, p_terms text[], p_documents bigint[], p_tokens text[],
    p_metadata jsonb
) RETURNS tsquery
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT concat_ws(' & ',
        '(' || (SELECT string_agg('''' || replace(replace(p_collection || ':' || t, '\', '\\'),
                                                  '''', '''''') || '''', ' | ')
                FROM unnest(p_terms) AS t) || ')',
        '(' || (SELECT string_agg('''' || m || '''', ' | ')
                FROM unnest(p_documents) AS d,
                     unnest(retrieval_bm25_marks(p_collection, d, NULL, NULL)) AS m) || ')',
        '(' || (SELECT string_agg('''' || m || '''', ' | ')
                FROM unnest(retrieval_bm25_marks(p_collection, NULL, to_jsonb(p_tokens), NULL))
                     AS m) || ')',
        (SELECT string_agg('''' || m || '''', ' & ')
         FROM unnest(retrieval_bm25_marks(p_collection, NULL, NULL, p_metadata)) AS m)
    )::tsquery
$function$;

CREATE OR REPLACE FUNCTION retrieval_bm25_chunk_marks_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE retrieval_bm25_chunk AS d
        SET lexemes = ts_delete(d.lexemes, retrieval_bm25_marks(OLD.collection_id, OLD.document_id,
                                                                OLD.access, OLD.metadata))
                      || array_to_tsvector(retrieval_bm25_marks(NEW.collection_id, NEW.document_id,
                                                                NEW.access, NEW.metadata))
        WHERE d.chunk_id = NEW.id;
    RETURN NULL;
END $function$;

CREATE TRIGGER retrieval_bm25_chunk_marks_changed
    AFTER UPDATE OF collection_id, document_id, access, metadata ON retrieval_chunk FOR EACH ROW
    WHEN (((old.collection_id IS DISTINCT FROM new.collection_id) OR (old.document_id IS DISTINCT FROM new.document_id) OR (old.access IS DISTINCT FROM new.access) OR (old.metadata IS DISTINCT FROM new.metadata)))
    EXECUTE FUNCTION retrieval_bm25_chunk_marks_changed();
