import pgvector.django
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0002_bm25_index")]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="embedding_next",
            field=pgvector.django.VectorField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="indexrun",
            name="heartbeat_at",
            field=models.DateTimeField(
                blank=True, help_text="Last sign of life of the process running the job.", null=True
            ),
        ),
        migrations.AddField(
            model_name="indexrun",
            name="task_id",
            field=models.CharField(blank=True, help_text="django-q2 task id.", max_length=64),
        ),
        migrations.AddIndex(
            model_name="indexrun",
            index=models.Index(fields=["status"], name="retrieval_indexrun_status_idx"),
        ),
    ]
