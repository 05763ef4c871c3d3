"""The permission to change what the access hooks decide by (a collection's name, slug or
metadata): ``retrieval.change_collection_access`` (``retrieval.services.access``)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0031_indexrun_resume'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='collection',
            options={'ordering': ['name'], 'permissions': [('change_collection_access', 'Can change what decides who sees a collection')]},
        ),
    ]
