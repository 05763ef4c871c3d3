-- What the planner estimates a reader's scope of one collection from (the current
-- definitions; migration 0030 created them).
--
-- A reader's scope is the condition c.collection_id = X AND c.access ?| ARRAY[tokens]
-- (services/query/filters.py). PostgreSQL estimates the two halves apart and multiplies
-- them, as if who may see a chunk had nothing to do with its collection. But every
-- reader holds "public": with one public collection of 10,000 chunks beside a restricted
-- one of 100,000, a scope of 99 chunks of the restricted one was estimated at 9,168
-- (the public collection's share of the table), and the dense leg walked its graph for a
-- 9% scope instead of scanning 99 vectors (recall@10 0.81, 44x an open search).
--
-- The same tokens prefixed with the chunk's collection ("42:public") are one value the
-- planner keeps statistics of (the extended statistics below, gathered by ANALYZE):
-- retrieval_collection_access(c.collection_id, c.access) ?| ARRAY['42:public', ...]
-- is estimated as that collection's share, and implies the collection. It is only
-- planned (EXPLAIN), never run: searches keep the indexed c.access ?| condition. It is
-- PARALLEL UNSAFE so that the parts of a scope, estimated together as one UNION ALL, are
-- planned as one Append whose members' rows are read off it: on a large table a parallel
-- plan (a Gather over per-worker estimates) sent one EXPLAIN per part instead.

CREATE OR REPLACE FUNCTION retrieval_collection_access(collection_id bigint, access jsonb)
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE PARALLEL UNSAFE
AS $function$
SELECT CASE
    WHEN jsonb_typeof(access) <> 'array' OR jsonb_array_length(access) = 0 THEN access
    ELSE (SELECT jsonb_agg(collection_id::text || ':' || token)
          FROM jsonb_array_elements_text(access) AS token)
END
$function$;

CREATE STATISTICS IF NOT EXISTS retrieval_chunk_collection_access
    ON (retrieval_collection_access(collection_id, access)) FROM retrieval_chunk;
