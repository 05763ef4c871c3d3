"""Which face ran each search (``QueryTrace.source``), so analytics can leave editors'
searches out; the trace indexes include it to stay index-only."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0032_access_perm'),
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
        migrations.RemoveIndex(
            model_name='querytrace',
            name='retrieval_trace_empty_idx',
        ),
        migrations.AddField(
            model_name='querytrace',
            name='source',
            field=models.CharField(choices=[('page', 'Search page'), ('api', 'API'), ('tool', 'Tool call'), ('playground', 'Playground'), ('evaluation', 'Evaluation'), ('command', 'Command'), ('python', 'Python')], db_default='python', default='python', max_length=20),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(fields=['collection', 'created_at'], include=('query_key', 'result_count', 'ms', 'source'), name='retrieval_trace_report_idx'),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(fields=['user', 'collection', 'created_at'], include=('query_key', 'result_count', 'ms', 'source'), name='retrieval_trace_user_idx'),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(condition=models.Q(('result_count', 0)), fields=['collection', 'created_at'], include=('query_key', 'source'), name='retrieval_trace_empty_idx'),
        ),
    ]
