"""Collections name their vector index; the outbox of changes for external indexes.

Chunk inserts and deletes of a collection whose index is external are recorded in
``retrieval_indexoperation`` by statement triggers, in the writing transaction, so
every path (ingestion, document and collection deletes, cascades, host models, raw
SQL) is covered; the drain (services.indexes.outbox) applies them to the engine.
"""

from django.db import migrations, models

CREATE = """
CREATE FUNCTION retrieval_chunk_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO retrieval_indexoperation
        (collection_id, index, kind, chunk_ids, attempts, last_error, next_attempt_at, created_at)
    SELECT r.collection_id, c.index,
           CASE WHEN TG_OP = 'INSERT' THEN 'write' ELSE 'delete' END,
           jsonb_agg(r.id ORDER BY r.id), 0, '', now(), now()
    FROM changed_rows r JOIN retrieval_collection c ON c.id = r.collection_id
    WHERE c.external_index
    GROUP BY r.collection_id, c.index;
    RETURN NULL;
END $$;
CREATE TRIGGER retrieval_chunk_outbox_insert AFTER INSERT ON retrieval_chunk
    REFERENCING NEW TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrieval_chunk_outbox();
CREATE TRIGGER retrieval_chunk_outbox_delete AFTER DELETE ON retrieval_chunk
    REFERENCING OLD TABLE AS changed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION retrieval_chunk_outbox();
"""

DROP = """
DROP TRIGGER IF EXISTS retrieval_chunk_outbox_insert ON retrieval_chunk;
DROP TRIGGER IF EXISTS retrieval_chunk_outbox_delete ON retrieval_chunk;
DROP FUNCTION IF EXISTS retrieval_chunk_outbox();
"""


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0006_bm25_writer_lock")]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="index",
            field=models.CharField(
                default="default",
                help_text="Alias of the vector index in RETRIEVAL['INDEXES']; set at creation.",
                max_length=100,
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="external_index",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.AddField(
            model_name="collection",
            name="index_space",
            field=models.CharField(blank=True, editable=False, max_length=200),
        ),
        migrations.CreateModel(
            name="IndexOperation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("collection_id", models.BigIntegerField(db_index=True)),
                ("index", models.CharField(help_text="Alias in RETRIEVAL['INDEXES'].", max_length=100)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("write", "Write vectors"),
                            ("delete", "Delete vectors"),
                            ("drop", "Drop the space"),
                            ("rebuild", "Rebuild the space"),
                        ],
                        max_length=20,
                    ),
                ),
                ("chunk_ids", models.JSONField(blank=True, default=list)),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("last_error", models.TextField(blank=True)),
                ("next_attempt_at", models.DateTimeField(auto_now_add=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "ordering": ["pk"],
                "indexes": [models.Index(fields=["next_attempt_at"], name="retrieval_indexop_due_idx")],
            },
        ),
        migrations.RunSQL(CREATE, DROP),
    ]
