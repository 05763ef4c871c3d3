"""Chunk.indexed_prefix: the header embedded and BM25-indexed before a chunk's content.

Chunks written before it had their document's title BM25-indexed before their content
(and their content alone embedded), so their header is set to that title: rebuilding
their postings gives what they have. ``retrieval_reindex`` gives them full headers.
"""

from django.db import migrations, models

SET_TITLES = """
UPDATE retrieval_chunk AS c SET indexed_prefix = d.title
FROM retrieval_document AS d
WHERE d.id = c.document_id AND d.title <> ''
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0007_collection_index")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="indexed_prefix",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunSQL(SET_TITLES, reverse_sql=migrations.RunSQL.noop),
    ]
