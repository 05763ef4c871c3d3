"""The host-model registry: which of a site's models are indexed, into which collection, how.

Sites register models through :func:`retrieval.host_models.register`, which also connects
the save/delete signals; this module holds the registrations and renders an object as
the :class:`~retrieval.services.ingestion.ingest.Source` of its document (external id
``"<app_label>.<model>:<pk>"``). It imports nothing above the service layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.template import Context, Engine

from retrieval.models import Collection, Document
from retrieval.services.ingestion.ingest import Source

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
            metadata = {name: json_value(getattr(obj, name)) for name in self.metadata or []}
        metadata["object"] = {"model": self.label, "pk": json_value(obj.pk)}
        return Source.from_text(
            text, external_id=self.external_id(obj.pk), title=title[:1000], metadata=metadata
        )


_registry: dict[str, HostIndex] = {}


def add(entry: HostIndex) -> None:
    """Record ``entry``, replacing an earlier registration of the same model."""
    _registry[entry.label] = entry


def remove(label: str) -> None:
    """Forget the model ``label`` (``"app_label.model"``)."""
    _registry.pop(label.lower(), None)


def registration(label: str) -> HostIndex | None:
    """Return the registration of the model ``label`` (``"app_label.model"``), if any."""
    return _registry.get(label.lower())


def registrations(collection: str) -> list[HostIndex]:
    """Return the registrations that index into ``collection``."""
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


def json_value(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
