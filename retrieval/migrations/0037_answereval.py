"""Golden-set queries carry a reference answer and whether the documents answer them at
all, so grounded answers can be measured (issue 63)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0036_relevance'),
    ]

    operations = [
        migrations.AddField(
            model_name='evalquery',
            name='answerable',
            field=models.BooleanField(default=True, help_text='Whether the documents answer the query; an answer service should abstain on those that are not.'),
        ),
        migrations.AddField(
            model_name='evalquery',
            name='reference_answer',
            field=models.TextField(blank=True, help_text='A short answer written from the documents; grounded answers are scored against it (token F1). Blank: not scored.'),
        ),
    ]
