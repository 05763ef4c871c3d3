"""Chunk vectors kept in the table's own rows (``STORAGE MAIN``), not in its TOAST table.

pgvector's type is stored ``EXTERNAL``: a chunk row over about 2 KB (a 384-dimensional
vector is 1.5 KB, so any chunk of a few hundred characters) had its vector moved out of
line, and every ranked row then read it back through the TOAST index to compute its
distance. For the HNSW index's top 100 (the hybrid's dense leg) that cost about 0.6 ms
of 6.9 (40k chunks of 900 characters; top 10: 0.15 ms). The chunk's text, which only
the final results read, goes out of line first now. Rows written from here on; a table
rewrite (``VACUUM FULL retrieval_chunk``) moves the vectors already out of line.
"""

from django.db import migrations

COLUMNS = ("embedding", "embedding_next")
FORWARD = "ALTER TABLE retrieval_chunk " + ", ".join(
    f"ALTER COLUMN {column} SET STORAGE MAIN" for column in COLUMNS
)
REVERSE = "ALTER TABLE retrieval_chunk " + ", ".join(
    f"ALTER COLUMN {column} SET STORAGE EXTERNAL" for column in COLUMNS
)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0017_bm25_top_k_decompresses_a_row_once")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
