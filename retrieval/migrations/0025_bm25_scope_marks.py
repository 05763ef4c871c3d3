"""Each chunk's BM25 row holds its scope marks (``retrieval/sql/bm25_scope_marks.sql``).

A scope allowing 1% of a million chunks cost BM25 20-23 ms p50 (35-38 ms p95) against
3.6 ms for the open search (bench/results/scoped-1m-run3.txt): too many chunks to score
one by one, too few to survive a short over-fetch of the collection's ranking, so every
posting of the query's terms was read. The chunks' GIN index now holds, beside each
chunk's terms, a mark for its document, each access token of its visibility and each
leaf of its metadata, and a scope's chunks holding a query term are one index query.

The existing rows take their marks with the index dropped and built again (a million
rows: one index build instead of a million row-by-row GIN insertions).
"""

from importlib import import_module
from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"

chunk_terms = import_module("retrieval.migrations.0011_bm25_chunk_terms")

FORWARD = """
DROP INDEX retrieval_bm25_chunk_lexemes;
UPDATE retrieval_bm25_chunk AS d
    SET lexemes = d.lexemes || array_to_tsvector(
        retrieval_bm25_marks(c.collection_id, c.document_id, c.access, c.metadata))
    FROM retrieval_chunk c WHERE c.id = d.chunk_id;
CREATE INDEX retrieval_bm25_chunk_lexemes ON retrieval_bm25_chunk USING gin (lexemes)
    WITH (fastupdate = off);
"""

REVERSE = f"""
DROP TRIGGER IF EXISTS retrieval_bm25_chunk_marks_changed ON retrieval_chunk;
DROP FUNCTION IF EXISTS retrieval_bm25_chunk_marks_changed();
DROP FUNCTION IF EXISTS retrieval_bm25_scope_query(bigint, text[], bigint[], text[], jsonb);
DROP FUNCTION IF EXISTS retrieval_bm25_marks(bigint, bigint, jsonb, jsonb);
DROP FUNCTION IF EXISTS retrieval_bm25_metadata_leaves(jsonb);
UPDATE retrieval_bm25_chunk
    SET lexemes = ts_delete(lexemes, ARRAY(SELECT u.lexeme FROM unnest(lexemes) AS u
                                           WHERE u.lexeme LIKE '%#%'));
CREATE OR REPLACE FUNCTION retrieval_bm25_chunk_terms_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrieval_bm25_chunk AS c (chunk_id, collection_id, dl, tfs, lexemes)
        SELECT chunk_id, collection_id, max(dl), jsonb_object_agg(term, tf), {chunk_terms.LEXEMES}
        FROM added GROUP BY chunk_id, collection_id ORDER BY chunk_id
        ON CONFLICT (chunk_id) DO UPDATE
        SET dl = EXCLUDED.dl, tfs = c.tfs || EXCLUDED.tfs, lexemes = c.lexemes || EXCLUDED.lexemes;
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0024_chunk_access")]

    operations = [
        migrations.RunSQL(
            (FROZEN / "0025_bm25_scope_marks.sql").read_text() + FORWARD, reverse_sql=REVERSE
        )
    ]
