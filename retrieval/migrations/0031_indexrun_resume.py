"""IndexRun.resumed_from: a run that resumes another, whose worker stopped before it ended."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0030_chunk_access_estimate")]

    operations = [
        migrations.AddField(
            model_name="indexrun",
            name="resumed_from",
            field=models.ForeignKey(
                blank=True,
                help_text="The run this one resumes: its worker stopped before it ended.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="resumes",
                to="retrieval.indexrun",
            ),
        ),
    ]
