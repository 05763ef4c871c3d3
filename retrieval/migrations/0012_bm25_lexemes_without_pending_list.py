"""The chunks' lexeme index without a pending list (GIN ``fastupdate`` off).

With ``fastupdate`` on (PostgreSQL's default), new entries wait in an unsorted
pending list (up to ``gin_pending_list_limit``, 4 MB) until a vacuum merges them,
and every search of the index reads that list whole: after an ingest, each of the
BM25 top-k function's GIN look-ups read hundreds of pending pages (a 100k-chunk
search went from 2 ms to 7). Entries now go straight into the index; what is
pending from before is merged here.
"""

from django.db import migrations

FORWARD = """
ALTER INDEX retrieval_bm25_chunk_lexemes SET (fastupdate = off);
SELECT gin_clean_pending_list('retrieval_bm25_chunk_lexemes'::regclass);
"""
REVERSE = "ALTER INDEX retrieval_bm25_chunk_lexemes RESET (fastupdate);"


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0011_bm25_chunk_terms")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
