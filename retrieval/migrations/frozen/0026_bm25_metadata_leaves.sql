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
