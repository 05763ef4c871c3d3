"""BM25 top-k: a scored chunk's term frequencies are decompressed once, not once per term.

``retrieval_bm25_chunk.tfs`` is stored MAIN: inline, but compressed by PostgreSQL once
a row passes about 2 KB, as most rows of chunks of a few hundred words of prose do
(150 distinct terms or more). 0016's score expression looks each query term up with its
own ``->``, and each call decompressed the whole value again. The statements that score
rows now read ``tfs`` through a lateral subquery that returns it decompressed once per
row (``tfs || '{}'`` returns its left side, detoasted). Same values, so the same
ranking. Measured with a scratch harness, the two functions taking turns on 200 queries
of four terms, 50k chunks of 150-300 words (every row compressed): top 10 p50 1.22 ->
1.08 ms and p95 3.68 -> 2.75, top 100 3.29 -> 2.70 and 7.85 -> 5.40; on the same chunks
stored uncompressed, and on the latency bench's 100k collection (short chunks, 4% of
rows compressed), unchanged.
"""

from pathlib import Path

from django.db import migrations

FROZEN = Path(__file__).parent / "frozen"


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0016_bm25_top_k_scores_only_the_query_terms")]

    operations = [
        migrations.RunSQL(
            (FROZEN / "0017_bm25_top_k.sql").read_text(),
            reverse_sql=(FROZEN / "0016_bm25_top_k.sql").read_text(),
        )
    ]
