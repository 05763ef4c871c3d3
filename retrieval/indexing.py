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
both on transaction commit (:func:`retrieval.tasks.enqueue`). Its document's
external id is ``"<app_label>.<model>:<pk>"``; unchanged text is not re-embedded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models.signals import post_delete, post_save
from django.template import Context, Engine

from retrieval.models import Collection, Document
from retrieval.services.indexing import Source

TextSpec = str | Callable[[models.Model], str]


@dataclass(frozen=True)
class HostIndex:
    """How one model's objects become documents of one collection."""

    model: type[models.Model]
    collection: str
    text: TextSpec
    title: TextSpec | None = None
    metadata: list[str] | Callable[[models.Model], dict[str, Any]] | None = None
    condition: str | Callable[[models.Model], bool] | None = None

    @property
    def label(self) -> str:
        return self.model._meta.label_lower

    def external_id(self, pk: Any) -> str:
        return f"{self.label}:{pk}"

    def wants(self, obj: models.Model) -> bool:
        return self.condition is None or bool(_value(obj, self.condition))

    def source(self, obj: models.Model) -> Source:
        """Render ``obj`` as the source of its document."""
        text = str(_value(obj, self.text) or "")
        title = str(_value(obj, self.title) if self.title is not None else obj)
        if callable(self.metadata):
            metadata = dict(self.metadata(obj))
        else:
            metadata = {name: _json_value(getattr(obj, name)) for name in self.metadata or []}
        metadata["object"] = {"model": self.label, "pk": _json_value(obj.pk)}
        return Source.from_text(
            text, external_id=self.external_id(obj.pk), title=title[:1000], metadata=metadata
        )


_registry: dict[str, HostIndex] = {}


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
    _registry[entry.label] = entry
    uid = f"retrieval_host_{entry.label}"
    post_save.connect(_saved, sender=model, dispatch_uid=uid, weak=False)
    post_delete.connect(_deleted, sender=model, dispatch_uid=uid, weak=False)
    return entry


def unregister(model: type[models.Model]) -> None:
    """Stop indexing ``model``; its documents stay until deleted or reindexed."""
    label = model._meta.label_lower
    _registry.pop(label, None)
    post_save.disconnect(sender=model, dispatch_uid=f"retrieval_host_{label}")
    post_delete.disconnect(sender=model, dispatch_uid=f"retrieval_host_{label}")


def registration(label: str) -> HostIndex | None:
    return _registry.get(label.lower())


def registrations(collection: str) -> list[HostIndex]:
    return [entry for entry in _registry.values() if entry.collection == collection]


def source_for_document(document: Document) -> Source | None:
    """Return the source of a registered object's document, rendered from the object now."""
    label, _, pk = document.external_id.rpartition(":")
    entry = registration(label) if label else None
    if entry is None or entry.collection != document.collection.name:
        return None
    obj = entry.model._default_manager.filter(pk=pk).first()
    if obj is None or not entry.wants(obj):
        return None
    return entry.source(obj)


def sync_host_documents(collection: Collection) -> None:
    """Add pending documents for registered objects the collection lacks; drop the gone ones."""
    for entry in registrations(collection.name):
        manager = entry.model._default_manager
        prefix = f"{entry.label}:"
        wanted = {
            entry.external_id(obj.pk): obj
            for obj in manager.all().iterator()
            if entry.condition is None or entry.wants(obj)
        }
        known = set(
            collection.documents.filter(external_id__startswith=prefix).values_list(
                "external_id", flat=True
            )
        )
        Document.objects.bulk_create(
            [
                Document(collection=collection, external_id=key, title=str(obj)[:1000])
                for key, obj in wanted.items()
                if key not in known
            ],
            ignore_conflicts=True,
        )
        gone = known - set(wanted)
        if gone:
            collection.documents.filter(external_id__in=gone).delete()
            if collection.external_index:
                from retrieval.services.indexes import outbox

                outbox.schedule_drain()


def _saved(sender: type[models.Model], instance: models.Model, raw: bool = False, **_: Any):
    if raw:  # loaddata: the fixture's objects are indexed by a reindex, not one by one
        return
    from retrieval.tasks import enqueue, index_object, remove_object

    entry = _registry[sender._meta.label_lower]
    collection = Collection.objects.filter(name=entry.collection).first()
    task = index_object if entry.wants(instance) else remove_object
    enqueue(task, entry.label, _json_value(instance.pk), collection=collection)


def _deleted(sender: type[models.Model], instance: models.Model, **_: Any) -> None:
    from retrieval.tasks import enqueue, remove_object

    entry = _registry[sender._meta.label_lower]
    collection = Collection.objects.filter(name=entry.collection).first()
    if collection is not None:
        enqueue(remove_object, entry.label, _json_value(instance.pk), collection=collection)


_engine = Engine()


def _value(obj: models.Model, spec: TextSpec | Callable[[models.Model], Any]) -> Any:
    """Evaluate a template (``{{ title }}``), an attribute or method name, or a callable."""
    if callable(spec):
        return spec(obj)
    if "{{" in spec or "{%" in spec:
        fields = {
            f.name: getattr(obj, f.name) for f in obj._meta.concrete_fields if not f.is_relation
        }
        context = Context({**fields, "object": obj}, autoescape=False)
        return _engine.from_string(spec).render(context)
    value = getattr(obj, spec)
    return value() if callable(value) else value


def _json_value(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
