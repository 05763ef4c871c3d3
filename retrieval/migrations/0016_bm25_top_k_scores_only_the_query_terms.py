"""BM25 top-k, cheaper per chunk scored: a score sums as many term slots as the query has.

0015 scores a chunk's row with one expression of 16 term slots, whatever the query's
length; a query of four terms (the usual) evaluated twelve empty slots per chunk
scored. Each statement that scores rows now comes in three forms, of 4, 8 and 16
slots, and the first holding the query's terms runs (each keeps its own cached plan).
The scores are the same sums, so the ranking is 0015's. Measured with a scratch
harness, the two functions taking turns on the bench's 200 queries of four terms: at 1M
chunks, top 100 p50 5.12 -> 4.59 ms, top 10 3.03 -> 2.77; at 100k, top 10 1.07 -> 0.94.
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0015_bm25_top_k_cheaper_scoring")]

    operations = [
        migrations.RunSQL(
            (FROZEN / "0016_bm25_top_k.sql").read_text(),
            reverse_sql=(FROZEN / "0015_bm25_top_k.sql").read_text(),
        )
    ]
