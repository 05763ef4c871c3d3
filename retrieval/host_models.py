"""Index a site's own models: a blog post, a product, a page.

Register a model once, e.g. in its app's ``AppConfig.ready()``::

    from retrieval import host_models

    host_models.register(
        Post,
        collection="blog",
        text="{{ title }}\\n\\n{{ body }}",  # a template, method or attribute name, or callable
        title="title",                       # the same forms; default: str(obj)
        metadata=["author_id", "section"],   # field names, or a callable returning a dict
        condition=Q(published=True),         # a Q, a name or a callable: others are removed
        visibility="visible_to",             # who may see it: a Visibility, "public" ...
        url="get_absolute_url",              # stored as metadata["url"] (this is the default)
    )

Saving an object, through its own class, a subclass, a parent (multi-table
inheritance) or a proxy, enqueues its indexing on transaction commit
(:func:`retrieval.services.ingestion.runs.enqueue_run`), and the condition is evaluated
again each time. Who may see it never waits for that worker: in the saving transaction,
an object failing the condition, or deleted, loses its document at once (a
``remove_object`` run, inline), and a kept one's document takes its visibility. Its
document's external id is ``"<app_label>.<model>:<pk>"``. Unchanged text is not
embedded again; a new title, URL, metadata or visibility is stored all the same.
Markup in the text (a StreamField's or rich text's HTML) is reduced to its text.
``retrieval_reindex`` backfills every registered collection (creating it), and adds or
drops what signals missed (bulk writes). Wagtail pages: :mod:`retrieval.contrib.wagtail`.
The registry itself is service code, :mod:`retrieval.services.ingestion.host_registry`;
this module connects the signals and re-exports it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from django.db import models, transaction
from django.db.models.signals import post_delete, post_save

from retrieval.models import Collection
from retrieval.services.ingestion.host_registry import (
    ConditionSpec,
    HostIndex,
    TextSpec,
    has_document,
    json_value,
    registration,
    registrations,
    related,
    settle_documents,
    source_for_document,
    store_visibility,
    sync_host_documents,
)
from retrieval.services.ingestion.host_registry import add as _add
from retrieval.services.ingestion.host_registry import remove as _remove
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.services.queues import runs_inline
from retrieval.services.visibility import Visibility
from retrieval.tasks import index_object, index_objects, remove_object

__all__ = [
    "HostIndex",
    "Visibility",
    "refresh",
    "refresh_objects",
    "register",
    "registration",
    "registrations",
    "source_for_document",
    "sync_host_documents",
    "unregister",
]

_UID = "retrieval_host_models"


def register(
    model: type[models.Model],
    *,
    collection: str,
    text: TextSpec,
    title: TextSpec | None = None,
    metadata: list[str] | Callable[[models.Model], dict[str, Any]] | None = None,
    condition: ConditionSpec | None = None,
    visibility: TextSpec | None = None,
    url: TextSpec | None = None,
    quiet_fields: Iterable[str] = (),
) -> HostIndex:
    """Index ``model``'s objects into ``collection`` when saved, remove them when deleted.

    A save whose ``update_fields`` are all in ``quiet_fields`` is not followed.
    """
    entry = HostIndex(
        model,
        collection,
        text,
        title,
        metadata,
        condition,
        visibility,
        url,
        frozenset(quiet_fields),
    )
    _add(entry)
    # One receiver for every model: a row's save may come through any class of it.
    post_save.connect(_saved, dispatch_uid=f"{_UID}_save", weak=False)
    post_delete.connect(_deleted, dispatch_uid=f"{_UID}_delete", weak=False)
    return entry


def unregister(model: type[models.Model]) -> None:
    """Stop indexing ``model``; its documents stay until the collection is reindexed
    (system check ``retrieval.W022`` counts them)."""
    _remove(model._meta.label_lower)


def refresh(entry: HostIndex, obj: models.Model) -> None:
    """Enqueue indexing ``obj`` (the registered model's view of it) or remove its document.

    Who may see it is applied now, in the saving transaction: an object the condition
    no longer keeps loses its document (a ``remove_object`` run, inline), a kept one's
    document takes its visibility; only the indexing waits for a worker. Removal runs
    only when it has a document, so saving a draft that was never indexed records no
    run. On a queue, one object is enqueued once per transaction (a Wagtail publish
    saves the page and sends ``page_published``): the task reads the object when the
    transaction has committed.
    """
    pk = json_value(obj.pk)
    collection = Collection.objects.filter(name=entry.collection).first()
    if not entry.wants(obj):
        _remove_now(entry, pk, collection)
        return
    if collection is not None:
        store_visibility(collection, entry, obj)
    if not _pending(("index", entry.label, pk)):
        enqueue_run(index_object, entry.label, pk, collection=collection)


def refresh_objects(objects: Iterable[tuple[HostIndex, Any]]) -> None:
    """Enqueue indexing many registered objects again: one run per collection.

    Who may see those that have a document is applied now (see :func:`refresh`).
    """
    grouped: dict[str, list[tuple[HostIndex, Any]]] = defaultdict(list)
    for entry, pk in objects:
        grouped[entry.collection].append((entry, json_value(pk)))
    for name, members in grouped.items():
        collection = Collection.objects.filter(name=name).first()
        if collection is not None:
            settle_documents(collection, members)
        labelled = [[entry.label, pk] for entry, pk in members]
        enqueue_run(index_objects, labelled, collection=collection)


def _remove_now(entry: HostIndex, pk: Any, collection: Collection | None) -> None:
    """Remove the object's document in this transaction, recorded as a run, if it has one."""
    if collection is not None and has_document(entry, pk):
        enqueue_run(remove_object, entry.label, pk, collection=collection, sync=True)


class _Pending:
    """A no-op on-commit callback: this transaction has enqueued the work ``key`` names."""

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key

    def __call__(self) -> None:
        pass


def _pending(key: tuple[Any, ...]) -> bool:
    """True if this transaction already enqueued ``key``'s work for after its commit;
    else remember it. Rolled back with its savepoint, like every on-commit callback."""
    if runs_inline():  # inline work ran at once: later changes need a run of their own
        return False
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        return False
    if any(getattr(callback[1], "key", None) == key for callback in connection.run_on_commit):
        return True
    transaction.on_commit(_Pending(key))
    return False


def _saved(
    sender: type[models.Model],
    instance: models.Model,
    raw: bool = False,
    update_fields: Iterable[str] | None = None,
    **_: Any,
) -> None:
    if raw:  # loaddata: the fixture's objects are indexed by a reindex, not one by one
        return
    for entry, _how in related(sender):
        if update_fields and entry.quiet_fields.issuperset(update_fields):
            continue
        if isinstance(instance, entry.model):
            obj = instance
        else:  # a parent (a Page saved by unpublish()) or a proxy: is it one of ours?
            obj = entry.get(instance.pk)
            if obj is None:
                continue
        refresh(entry, obj)


def _deleted(sender: type[models.Model], instance: models.Model, **_: Any) -> None:
    # Deleting a row of any class deletes (and signals) its rows of every other class:
    # the registered table's own signal is the one to act on.
    for entry, how in related(sender):
        if how == "same":
            collection = Collection.objects.filter(name=entry.collection).first()
            _remove_now(entry, json_value(instance.pk), collection)
