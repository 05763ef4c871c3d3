"""Answers are traced as their own source (``QueryTrace.Source.ANSWER``)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0033_querytrace_source'),
    ]

    operations = [
        migrations.AlterField(
            model_name='querytrace',
            name='source',
            field=models.CharField(choices=[('page', 'Search page'), ('api', 'API'), ('tool', 'Tool call'), ('playground', 'Playground'), ('evaluation', 'Evaluation'), ('command', 'Command'), ('python', 'Python'), ('answer', 'Answer')], db_default='python', default='python', max_length=20),
        ),
    ]
