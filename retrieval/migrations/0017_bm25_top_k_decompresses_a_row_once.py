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

from importlib import import_module

from django.db import migrations

query_slots = import_module("retrieval.migrations.0016_bm25_top_k_scores_only_the_query_terms")

FETCHED = "FROM retrieval_bm25_chunk d\n"
DECOMPRESSED = (
    "FROM retrieval_bm25_chunk d\n"
    "CROSS JOIN LATERAL (SELECT d.tfs || '{}'::jsonb AS tfs OFFSET 0) AS t\n"
)
LOOKUP, DECOMPRESSED_LOOKUP = "(d.tfs -> v_terms[", "(t.tfs -> v_terms["


def changed(function: str) -> str:
    # Step 1's and step 2's statements, each in one form per slot count (0016).
    assert function.count(FETCHED) == 2 * len(query_slots.SLOTS)
    assert function.count(LOOKUP) == 2 * sum(query_slots.SLOTS)
    return function.replace(FETCHED, DECOMPRESSED).replace(LOOKUP, DECOMPRESSED_LOOKUP)


TOP_K_FUNCTION = changed(query_slots.TOP_K_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0016_bm25_top_k_scores_only_the_query_terms")]

    operations = [
        migrations.RunSQL(TOP_K_FUNCTION, reverse_sql=query_slots.TOP_K_FUNCTION)
    ]
