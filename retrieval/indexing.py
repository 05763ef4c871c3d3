"""Index a site's own models: a blog post, a product, a page.

Register a model once, e.g. in its app's ``AppConfig.ready()``::

    from retrieval import indexing

    indexing.register(
        Post,
        collection="blog",
        text="{{ title }}\\n\\n{{ body }}",  # a template, method or attribute name, or callable
        title="title",                       # the same forms; default: str(obj)
        metadata=["author_id", "published"], # field names, or a callable returning a dict
        condition="is_public",               # optional: objects failing it are removed
    )

Saving an object enqueues its indexing and deleting it enqueues its removal,
both on transaction commit (:func:`retrieval.services.runs.enqueue_run`). Its document's
external id is ``"<app_label>.<model>:<pk>"``; unchanged text is not re-embedded.
The registry itself is service code, :mod:`retrieval.services.hosts`; this module
connects the signals and re-exports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import models
from django.db.models.signals import post_delete, post_save

from retrieval.models import Collection
from retrieval.services.hosts import (
    HostIndex,
    TextSpec,
    json_value,
    registration,
    registrations,
    source_for_document,
    sync_host_documents,
)
from retrieval.services.hosts import add as _add
from retrieval.services.hosts import remove as _remove
from retrieval.services.runs import enqueue_run
from retrieval.tasks import index_object, remove_object

__all__ = [
    "HostIndex",
    "register",
    "registration",
    "registrations",
    "source_for_document",
    "sync_host_documents",
    "unregister",
]


def register(
    model: type[models.Model],
    *,
    collection: str,
    text: TextSpec,
    title: TextSpec | None = None,
    metadata: list[str] | Callable[[models.Model], dict[str, Any]] | None = None,
    condition: str | Callable[[models.Model], bool] | None = None,
) -> HostIndex:
    """Index ``model``'s objects into ``collection`` when saved, remove them when deleted."""
    entry = HostIndex(model, collection, text, title, metadata, condition)
    _add(entry)
    uid = f"retrieval_host_{entry.label}"
    post_save.connect(_saved, sender=model, dispatch_uid=uid, weak=False)
    post_delete.connect(_deleted, sender=model, dispatch_uid=uid, weak=False)
    return entry


def unregister(model: type[models.Model]) -> None:
    """Stop indexing ``model``; its documents stay until deleted or reindexed."""
    label = model._meta.label_lower
    _remove(label)
    post_save.disconnect(sender=model, dispatch_uid=f"retrieval_host_{label}")
    post_delete.disconnect(sender=model, dispatch_uid=f"retrieval_host_{label}")


def _saved(sender: type[models.Model], instance: models.Model, raw: bool = False, **_: Any):
    if raw:  # loaddata: the fixture's objects are indexed by a reindex, not one by one
        return
    entry = registration(sender._meta.label_lower)
    if entry is None:
        return
    collection = Collection.objects.filter(name=entry.collection).first()
    task = index_object if entry.wants(instance) else remove_object
    enqueue_run(task, entry.label, json_value(instance.pk), collection=collection)


def _deleted(sender: type[models.Model], instance: models.Model, **_: Any) -> None:
    entry = registration(sender._meta.label_lower)
    collection = None if entry is None else Collection.objects.filter(name=entry.collection).first()
    if collection is not None:
        enqueue_run(remove_object, entry.label, json_value(instance.pk), collection=collection)
