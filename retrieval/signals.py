"""Signal receivers that keep database objects outside Django's models in step."""

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from .models import Collection


@receiver(post_delete, sender=Collection, dispatch_uid="retrieval_drop_vector_index")
def drop_collection_vector_index(
    sender: type, instance: Collection, using: str, **kwargs: Any
) -> None:
    """Drop a deleted collection's partial HNSW index once the delete commits."""
    from .services.collections import drop_vector_index

    collection_id = instance.pk
    transaction.on_commit(lambda: drop_vector_index(collection_id), using=using)
