"""Signal receivers that keep things outside Django's models in step: indexes, files."""

from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from .models import Collection, Document, Synonym


@receiver(post_delete, sender=Collection, dispatch_uid="retrieval_drop_vector_index")
def drop_collection_vector_index(
    sender: type, instance: Collection, using: str, **kwargs: Any
) -> None:
    """Drop a deleted collection's space in its index.

    pgvector's HNSW index is dropped once the delete commits; an external index gets
    a "drop" operation in the outbox, in the delete's own transaction.
    """
    from .services.indexes import outbox
    from .services.registry import indexes

    collection_id, alias = instance.pk, instance.index or "default"
    if alias not in indexes:
        return  # an index unconfigured since: nothing this site can drop
    index = indexes[alias]
    if index.features.transactional:
        transaction.on_commit(lambda: index.drop_space(collection_id), using=using)
    else:
        outbox.record_drop(collection_id, alias, using=using)


@receiver(pre_save, sender=Document, dispatch_uid="retrieval_delete_replaced_source")
def delete_replaced_source_file(
    sender: type, instance: Document, using: str, update_fields=None, **kwargs: Any
) -> None:
    """Delete a document's previous stored file once a save replacing it commits.

    Deletes are left alone: a receiver on Document deletes would make Django load
    every document of a deleted collection.
    """
    if instance.pk is None or (update_fields is not None and "source_file" not in update_fields):
        return
    previous = (
        Document.objects.using(using)
        .filter(pk=instance.pk)
        .values_list("source_file", flat=True)
        .first()
    )
    if previous and previous != instance.source_file.name:
        storage = instance.source_file.storage
        transaction.on_commit(lambda: storage.delete(previous), using=using)


@receiver(post_save, sender=Synonym, dispatch_uid="retrieval_synonym_saved")
@receiver(post_delete, sender=Synonym, dispatch_uid="retrieval_synonym_deleted")
def forget_synonyms(sender: type, using: str, **kwargs: Any) -> None:
    """Make the next search read the synonyms again: now, for this connection's own
    searches, and once the change commits, for the others' (a search in between would
    cache the rules as they were)."""
    from .services.sparse.synonyms import forget_synonyms

    forget_synonyms()
    transaction.on_commit(forget_synonyms, using=using)
