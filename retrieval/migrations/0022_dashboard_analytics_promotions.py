"""Search analytics and promotions (issue 36).

QueryTrace gets ``query_key`` (the query normalised, a stored generated column) and
covering indexes that answer the dashboard's and search analytics' figures by
index-only scans: a collection's traces of a period, a user's own, and those that found
nothing. They replace the (collection, created_at) index and the plain foreign-key
indexes they lead with. Adding the column rewrites the traces' table once. Promotion
pins documents to a query or a pattern in a collection.
"""

import django.db.models.deletion
import django.db.models.functions.text
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0021_document_access'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Promotion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('query', models.CharField(help_text='The query, or a pattern where * stands for any text: “vpn*”, “reset * password”. Case and spacing are ignored.', max_length=500)),
                ('position', models.PositiveSmallIntegerField(default=1, help_text='Order among the documents promoted for a query (1 comes first).')),
                ('active', models.BooleanField(default=True)),
                ('note', models.CharField(blank=True, help_text='Why it is promoted.', max_length=500)),
                ('pattern', models.GeneratedField(db_persist=True, expression=django.db.models.functions.text.Replace(django.db.models.functions.text.Replace(django.db.models.functions.text.Replace(django.db.models.functions.text.Replace(django.db.models.functions.text.Trim(django.db.models.functions.text.Lower(models.Func(models.F('query'), models.Value('\\s+'), models.Value(' '), models.Value('g'), function='regexp_replace', output_field=models.TextField()), output_field=models.TextField()), output_field=models.TextField()), models.Value('\\'), models.Value('\\\\'), output_field=models.TextField()), models.Value('%'), models.Value('\\%'), output_field=models.TextField()), models.Value('_'), models.Value('\\_'), output_field=models.TextField()), models.Value('*'), models.Value('%'), output_field=models.TextField()), output_field=models.CharField(max_length=2000))),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['collection', 'query', 'position', 'pk'],
            },
        ),
        migrations.RemoveIndex(
            model_name='querytrace',
            name='retrieval_trace_coll_idx',
        ),
        migrations.AddField(
            model_name='querytrace',
            name='query_key',
            field=models.GeneratedField(db_persist=True, expression=django.db.models.functions.text.Left(django.db.models.functions.text.Trim(django.db.models.functions.text.Lower(models.Func(models.F('query'), models.Value('\\s+'), models.Value(' '), models.Value('g'), function='regexp_replace', output_field=models.TextField()), output_field=models.TextField()), output_field=models.TextField()), 200, output_field=models.TextField()), output_field=models.CharField(max_length=200)),
        ),
        migrations.AlterField(
            model_name='querytrace',
            name='collection',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='retrieval.collection'),
        ),
        migrations.AlterField(
            model_name='querytrace',
            name='user',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(fields=['collection', 'created_at'], include=('query_key', 'result_count', 'ms'), name='retrieval_trace_report_idx'),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(fields=['user', 'collection', 'created_at'], include=('query_key', 'result_count', 'ms'), name='retrieval_trace_user_idx'),
        ),
        migrations.AddIndex(
            model_name='querytrace',
            index=models.Index(condition=models.Q(('result_count', 0)), fields=['collection', 'created_at'], include=('query_key',), name='retrieval_trace_empty_idx'),
        ),
        migrations.AddField(
            model_name='promotion',
            name='collection',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='promotions', to='retrieval.collection'),
        ),
        migrations.AddField(
            model_name='promotion',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='promotion',
            name='document',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='promotions', to='retrieval.document'),
        ),
        migrations.AddIndex(
            model_name='promotion',
            index=models.Index(fields=['collection', 'active'], name='retrieval_promotion_coll_idx'),
        ),
        migrations.AddConstraint(
            model_name='promotion',
            constraint=models.UniqueConstraint(fields=('collection', 'pattern', 'document'), name='retrieval_promotion_unique_document'),
        ),
    ]
