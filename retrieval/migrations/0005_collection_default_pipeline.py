from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0004_graph")]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="default_pipeline",
            field=models.CharField(
                blank=True,
                help_text="Pipeline alias; blank uses DEFAULT_PIPELINE.",
                max_length=100,
            ),
        ),
    ]
