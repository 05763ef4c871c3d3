"""Clicks on search results (``SearchClick``), one per kept search and document."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0034_answers'),
    ]

    operations = [
        migrations.CreateModel(
            name='SearchClick',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('document', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='retrieval.document')),
                ('trace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='clicks', to='retrieval.querytrace')),
            ],
            options={
                'ordering': ['-created_at'],
                'constraints': [models.UniqueConstraint(fields=('trace', 'document'), name='retrieval_click_once')],
            },
        ),
    ]
