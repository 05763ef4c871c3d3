"""The trace indexes include the user (unique searchers) and the id (a trace's clicks),
so click-through rates and searchers are read from them too, index-only."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0037_answereval'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='querytrace',
            name='retrieval_trace_report_idx',
        ),
        migrations.RemoveIndex(
            model_name='querytrace',
            name='retrieval_trace_user_idx',
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(fields=['collection', 'created_at'], include=('query_key', 'result_count', 'ms', 'source', 'user', 'id'), name='retrieval_trace_report_idx'),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(fields=['user', 'collection', 'created_at'], include=('query_key', 'result_count', 'ms', 'source', 'id'), name='retrieval_trace_user_idx'),
        ),
    ]
