"""IndexRun.scope is IndexRun.task: the work the run records (not the access Scope)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0019_evalset_name_unique_per_collection")]

    operations = [
        migrations.RenameField(model_name="indexrun", old_name="scope", new_name="task"),
        migrations.AlterField(
            model_name="indexrun",
            name="task",
            field=models.CharField(
                help_text="The work the run records: ingest, index_documents, graph ...",
                max_length=50,
            ),
        ),
    ]
