"""A reader's scope estimated per collection: ``retrieval_collection_access`` and its
extended statistics (``retrieval/sql/chunk_access_estimate.sql``).

The statistics are gathered by the ``ANALYZE`` below (a sample of 30,000 chunks, seconds
at a million) and by autovacuum after it.
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0029_bm25_marked_top_k")]

    operations = [
        migrations.RunSQL(
            (FROZEN / "0030_chunk_access_estimate.sql").read_text() + "\nANALYZE retrieval_chunk;",
            reverse_sql="DROP STATISTICS IF EXISTS retrieval_chunk_collection_access; "
            "DROP FUNCTION IF EXISTS retrieval_collection_access(bigint, jsonb);",
        )
    ]
