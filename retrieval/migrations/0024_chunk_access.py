"""Each chunk carries a copy of its document's host visibility (``retrieval_chunk.access``),
kept by triggers (``retrieval/sql/chunk_access.sql``).

A signed-in reader's scope was ``c.document_id IN (documents whose access lets the
reader in)``: at a million chunks, a scope allowing 1% of them cost dense search 59 ms
p50 against 20 ms for a metadata filter of the same size, and the hybrid 125 against 48
(bench/results/scoped-1m-run2.txt), since each allowed document's chunks were looked up
one by one. It is now ``c.access ?| ARRAY[tokens]``, a condition on the chunk row that
the chunks' GIN index answers and the planner estimates, as it does a metadata filter.

A document its host does not restrict (``access`` null) gives its chunks ``["public"]``,
a token every reader holds, so the condition needs no ``IS NULL`` branch.
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"

FORWARD = """
ALTER TABLE retrieval_chunk ADD COLUMN access jsonb NOT NULL DEFAULT '["public"]'::jsonb;
UPDATE retrieval_chunk c SET access = d.access
    FROM retrieval_document d WHERE d.id = c.document_id AND d.access IS NOT NULL;
CREATE INDEX retrieval_chunk_access_gin ON retrieval_chunk USING gin (access)
    WITH (fastupdate = off);
"""

REVERSE = """
DROP TRIGGER IF EXISTS retrieval_chunk_access_written ON retrieval_chunk;
DROP TRIGGER IF EXISTS retrieval_document_access_changed ON retrieval_document;
DROP TRIGGER IF EXISTS retrieval_document_access_written ON retrieval_document;
DROP FUNCTION IF EXISTS retrieval_chunk_access_from_document();
DROP FUNCTION IF EXISTS retrieval_document_access_to_chunks();
ALTER TABLE retrieval_chunk DROP COLUMN IF EXISTS access;
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0023_document_unrestricted_index")]

    operations = [
        migrations.RunSQL(
            FORWARD + (FROZEN / "0024_chunk_access.sql").read_text(), reverse_sql=REVERSE
        )
    ]
