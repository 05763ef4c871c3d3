"""Collection and document metadata refuse a NUL character (PostgreSQL's jsonb cannot
store it) in model forms, the admin's among them. No SQL: validators live in Python.
"""

import retrieval.validation.storable
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0013_metadata_indexes_without_pending_list"),
    ]

    operations = [
        migrations.AlterField(
            model_name="collection",
            name="metadata",
            field=models.JSONField(
                blank=True,
                default=dict,
                validators=[retrieval.validation.storable.validate_storable_metadata],
            ),
        ),
        migrations.AlterField(
            model_name="document",
            name="metadata",
            field=models.JSONField(
                blank=True,
                default=dict,
                validators=[retrieval.validation.storable.validate_storable_metadata],
            ),
        ),
    ]
