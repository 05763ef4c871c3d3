"""Document.access: who may see a document, decided by its host object (a GIN index for
the search condition, ``access ?| ARRAY[tokens]``, and a partial one for "is any document
restricted?").

The GIN index is created in SQL: Django's GinIndex would need django.contrib.postgres in
the site's INSTALLED_APPS on Django 6.1.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0020_index_run_task"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="access",
            field=models.JSONField(
                blank=True,
                help_text="Who may see it, from its host object (null: no restriction of the host's).",
                null=True,
            ),
        ),
        migrations.RunSQL(
            "CREATE INDEX retrieval_doc_access_idx ON retrieval_document USING gin (access)",
            "DROP INDEX IF EXISTS retrieval_doc_access_idx",
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                condition=models.Q(("access__isnull", False)),
                fields=["collection"],
                name="retrieval_doc_restricted_idx",
            ),
        ),
    ]
