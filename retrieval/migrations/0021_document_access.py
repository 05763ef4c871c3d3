"""Document.access: who may see a document, decided by its host object (a GIN index for
the search condition, a partial one for "is any document restricted?")."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0020_index_run_task'),
    ]

    operations = [
        migrations.AddField(
            model_name='document',
            name='access',
            field=django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=100), blank=True, help_text="Who may see it, from its host object (null: no restriction of the host's).", null=True, size=None),
        ),
        migrations.AddIndex(
            model_name='document',
            index=django.contrib.postgres.indexes.GinIndex(fields=['access'], name='retrieval_doc_access_idx'),
        ),
        migrations.AddIndex(
            model_name='document',
            index=models.Index(condition=models.Q(('access__isnull', False)), fields=['collection'], name='retrieval_doc_restricted_idx'),
        ),
    ]
