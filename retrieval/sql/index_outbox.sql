-- The external indexes' outbox (the current definitions; migration 0007 created them):
-- every chunk written to or deleted from a collection on an external index (Milvus,
-- Chroma) is recorded in retrieval_indexoperation in the same transaction, and
-- services/indexes/outbox.py applies the operations to the engine after the commit.

CREATE OR REPLACE FUNCTION retrieval_chunk_outbox()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO retrieval_indexoperation
        (collection_id, index, kind, chunk_ids, attempts, last_error, next_attempt_at, created_at)
    SELECT r.collection_id, c.index,
           CASE WHEN TG_OP = 'INSERT' THEN 'write' ELSE 'delete' END,
           jsonb_agg(r.id ORDER BY r.id), 0, '', now(), now()
    FROM changed_rows r JOIN retrieval_collection c ON c.id = r.collection_id
    WHERE c.external_index
    GROUP BY r.collection_id, c.index;
    RETURN NULL;
END $function$;

CREATE TRIGGER retrieval_chunk_outbox_insert AFTER INSERT ON retrieval_chunk
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_chunk_outbox();
CREATE TRIGGER retrieval_chunk_outbox_delete AFTER DELETE ON retrieval_chunk
    REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT
    EXECUTE FUNCTION retrieval_chunk_outbox();
