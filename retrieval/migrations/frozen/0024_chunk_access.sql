-- Each chunk's copy of its document's host visibility (the current definitions; migration
-- 0024 created them): retrieval_chunk.access is the document's access, or ["public"] for
-- a document its host does not restrict (access null: every reader holds "public").
--
-- A signed-in reader's scope is then a condition on the chunk row itself,
-- c.access ?| ARRAY[tokens] (services/query/filters.py), which the planner estimates
-- and answers from the chunks' GIN index like a metadata filter, instead of looking
-- each allowed document's chunks up. The column is no model field: only these triggers
-- write it, so no Python path can leave it stale. A chunk takes its document's value
-- when it is written or moved; a document whose access changes passes it to its chunks
-- in the same statement. A chunk written before its document (Django's foreign keys are
-- checked at commit: a fixture listing chunks first) is nobody's ([]) until the document
-- is written and passes its value on.

CREATE OR REPLACE FUNCTION retrieval_chunk_access_from_document()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    SELECT coalesce(d.access, '["public"]'::jsonb) INTO NEW.access
        FROM retrieval_document d WHERE d.id = NEW.document_id;
    IF NOT FOUND THEN
        NEW.access := '[]'::jsonb;  -- no document yet: nobody
    END IF;
    RETURN NEW;
END $function$;

CREATE OR REPLACE FUNCTION retrieval_document_access_to_chunks()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE retrieval_chunk SET access = coalesce(NEW.access, '["public"]'::jsonb)
        WHERE document_id = NEW.id;
    RETURN NULL;
END $function$;

CREATE TRIGGER retrieval_chunk_access_written BEFORE INSERT OR UPDATE OF document_id, access
    ON retrieval_chunk FOR EACH ROW EXECUTE FUNCTION retrieval_chunk_access_from_document();
CREATE TRIGGER retrieval_document_access_changed AFTER UPDATE OF access ON retrieval_document
    FOR EACH ROW WHEN ((old.access IS DISTINCT FROM new.access))
    EXECUTE FUNCTION retrieval_document_access_to_chunks();
CREATE TRIGGER retrieval_document_access_written AFTER INSERT ON retrieval_document
    FOR EACH ROW EXECUTE FUNCTION retrieval_document_access_to_chunks();
