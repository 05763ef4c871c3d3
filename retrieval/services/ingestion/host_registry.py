"""The host-model registry: which of a site's models are indexed, into which collection, how.

Sites register models through :func:`retrieval.host_models.register`, which also connects
the save/delete signals; this module holds the registrations and renders an object as
the :class:`~retrieval.services.ingestion.ingest.Source` of its document (external id
``"<app_label>.<model>:<pk>"``): its text (markup reduced to text), title, metadata (with
its URL) and who may see it (:mod:`retrieval.services.visibility`). Who may see a
document is applied at once (:func:`settle`: a cheap write the web process makes in the
host's transaction); only the embedding waits for a worker. It imports nothing above the
service layer.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import models, transaction
from django.db.models import Q
from django.template import Context, Engine

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Document, IndexRun
from retrieval.services.indexes import outbox
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.runs import finish_removal, label_run
from retrieval.services.parsers.html import HtmlParser
from retrieval.services.visibility import Visibility

logger = logging.getLogger(__name__)

TextSpec = str | Callable[[models.Model], Any]
ConditionSpec = str | Callable[[models.Model], bool] | Q


@dataclass(frozen=True)
class HostIndex:
    """How one model's objects become documents of one collection.

    ``condition`` (an attribute or method name, a callable, or a ``Q`` the object's row
    must match) keeps an object indexed; ``visibility`` (a name or callable returning a
    :class:`~retrieval.services.visibility.Visibility`, ``"public"``, ``"signed-in"`` or
    ``"nobody"``) says who may see its document; ``url`` defaults to the object's
    ``get_absolute_url()`` when it has one. A condition or visibility that raises counts
    as "not indexed" and "nobody": it fails closed.
    """

    model: type[models.Model]
    collection: str
    text: TextSpec
    title: TextSpec | None = None
    metadata: list[str] | Callable[[models.Model], dict[str, Any]] | None = None
    condition: ConditionSpec | None = None
    visibility: TextSpec | None = None
    url: TextSpec | None = None
    #: A save that updates only these fields is ignored (Wagtail's draft bookkeeping).
    quiet_fields: frozenset[str] = frozenset()

    @property
    def label(self) -> str:
        return self.model._meta.label_lower

    def external_id(self, pk: Any) -> str:
        return f"{self.label}:{pk}"

    def objects(self) -> models.QuerySet:
        """Return the model's objects that the condition may keep (a ``Q``: only those)."""
        queryset = self.model._default_manager.all()
        return queryset.filter(self.condition) if isinstance(self.condition, Q) else queryset

    def get(self, pk: Any, *, lock: bool = False) -> models.Model | None:
        """Return the object ``pk`` as this registration's model, or ``None``; ``lock``
        reads its rows ``FOR UPDATE`` (inside a transaction)."""
        objects = self.model._default_manager.filter(pk=pk)
        return (objects.select_for_update() if lock else objects).first()

    def wants(self, obj: models.Model) -> bool:
        """True if ``obj`` is to be indexed (its stored row, for a ``Q`` condition)."""
        if self.condition is None:
            return True
        try:
            if isinstance(self.condition, Q):
                return self.model._default_manager.filter(pk=obj.pk).filter(self.condition).exists()
            return bool(_value(obj, self.condition))
        except Exception:  # a broken condition keeps nothing indexed
            logger.exception("The condition of %s failed on %s: not indexed", self.label, obj.pk)
            return False

    def visibility_of(self, obj: models.Model) -> Visibility | None:
        """Return who may see ``obj``'s document (``None``: the registration does not say)."""
        if self.visibility is None:
            return None
        try:
            return Visibility.of(_value(obj, self.visibility))
        except Exception:
            logger.exception("The visibility of %s failed on %s: nobody", self.label, obj.pk)
            return Visibility.NOBODY

    def url_of(self, obj: models.Model) -> str | None:
        spec = self.url
        if spec is None:
            if not hasattr(obj, "get_absolute_url"):
                return None
            spec = "get_absolute_url"
        value = _value(obj, spec)
        return None if value is None else str(value)

    def object_of(self, obj: models.Model) -> dict[str, Any]:
        """Whose document it is: ``metadata["object"]`` of every host object's document."""
        return {"model": self.label, "pk": json_value(obj.pk)}

    def source(self, obj: models.Model) -> Source:
        """Render ``obj`` as the source of its document."""
        text = text_of(obj, self.text)
        title = text_of(obj, self.title) if self.title is not None else str(obj)
        if callable(self.metadata):
            metadata = dict(self.metadata(obj))
        else:
            metadata = {name: json_value(getattr(obj, name)) for name in self.metadata or []}
        url = self.url_of(obj)
        if url is not None:
            metadata["url"] = url
        metadata["object"] = self.object_of(obj)
        seen_by = self.visibility_of(obj)
        return Source.from_text(
            text,
            external_id=self.external_id(obj.pk),
            title=" ".join(title.split())[:1000],
            metadata=metadata,
            access=None if seen_by is None else tuple(seen_by.stored()),
        )


_registry: dict[str, HostIndex] = {}
#: Per model class that sent a signal: the registrations its rows may belong to.
_relations: dict[type[models.Model], list[tuple[HostIndex, str]]] = {}


def add(entry: HostIndex) -> None:
    """Record ``entry``, replacing an earlier registration of the same model."""
    _registry[entry.label] = entry
    _relations.clear()


def remove(label: str) -> None:
    """Forget the model ``label`` (``"app_label.model"``)."""
    _registry.pop(label.lower(), None)
    _relations.clear()


def registration(label: str) -> HostIndex | None:
    """Return the registration of the model ``label`` (``"app_label.model"``), if any."""
    return _registry.get(label.lower())


def registrations(collection: str | None = None) -> list[HostIndex]:
    """Return the registrations that index into ``collection`` (``None``: all of them)."""
    return [e for e in _registry.values() if collection is None or e.collection == collection]


def related(model: type[models.Model]) -> list[tuple[HostIndex, str]]:
    """Return the registrations a row saved or deleted as ``model`` may concern.

    Each comes with how: ``"same"`` (``model`` is the registered model's table, itself
    or a proxy), ``"child"`` (a subclass: the row is one of the registered model's) or
    ``"parent"`` (multi-table inheritance upwards: the row may be one of them, e.g. a
    Wagtail ``Page`` saved by ``unpublish()`` whose registered type is ``BlogPage``).
    """
    found = _relations.get(model)
    if found is None:
        found = []
        concrete = model._meta.concrete_model
        for entry in _registry.values():
            registered = entry.model._meta.concrete_model
            if concrete is registered:
                found.append((entry, "same"))
            elif issubclass(concrete, registered):
                found.append((entry, "child"))
            elif issubclass(registered, concrete):
                found.append((entry, "parent"))
        _relations[model] = found
    return found


def has_document(entry: HostIndex, pk: Any) -> bool:
    """True if the object ``pk`` of ``entry`` has a document (indexed or not)."""
    return Document.objects.filter(
        collection__name=entry.collection, external_id=entry.external_id(json_value(pk))
    ).exists()


def source_for_document(document: Document) -> Source | None:
    """Return the source of a registered object's document, rendered from the object now."""
    label, _, pk = document.external_id.rpartition(":")
    entry = registration(label) if label else None
    if entry is None or entry.collection != document.collection.name:
        return None
    obj = entry.get(pk)
    if obj is None or not entry.wants(obj):
        return None
    return entry.source(obj)


def settle(
    collection: Collection, entry: HostIndex, pk: Any, *, after_writers: bool = False
) -> tuple[models.Model | None, bool]:
    """Apply now who may see the object ``pk``'s document in ``collection``.

    A gone object, or one its condition no longer keeps, loses its document and chunks;
    a kept one's document takes its visibility. Return the object if it is to be
    indexed, and whether a document was removed. A read and a write: the web process
    does it in the host's transaction, so hiding never waits for a worker.

    ``after_writers`` first waits for any transaction changing the object's rows to end
    (a worker checking again after its write, which may have restored what such a
    transaction hid), holding no lock while it writes, so it cannot deadlock with one.
    """
    if after_writers:
        with transaction.atomic():
            entry.get(pk, lock=True)
    obj = entry.get(pk)
    if obj is None or not entry.wants(obj):
        documents = collection.documents.filter(external_id=entry.external_id(pk))
        return None, delete_documents(collection, documents) > 0
    store_visibility(collection, entry, obj)
    return obj, False


def store_visibility(collection: Collection, entry: HostIndex, obj: models.Model) -> None:
    """Store who may see ``obj`` on its document in ``collection`` (its chunks follow)."""
    seen_by = entry.visibility_of(obj)
    if seen_by is not None:
        documents = collection.documents.filter(external_id=entry.external_id(obj.pk))
        documents.update(access=seen_by.stored())


def settle_documents(collection: Collection, objects: Iterable[tuple[HostIndex, Any]]) -> None:
    """:func:`settle` those of the registered objects ``(entry, pk)`` that have a document."""
    wanted = {entry.external_id(json_value(pk)): (entry, pk) for entry, pk in objects}
    indexed = collection.documents.filter(external_id__in=list(wanted))
    for external_id in indexed.values_list("external_id", flat=True):
        settle(collection, *wanted[external_id])


def delete_documents(collection: Collection, documents: models.QuerySet) -> int:
    """Delete ``documents`` of ``collection`` and their chunks; return how many documents.

    An external index follows through the outbox (triggers record the chunk deletes).
    """
    deleted = documents.delete()[1].get(Document._meta.label, 0)
    if deleted:
        outbox.changed(collection)
    return deleted


def index_object(label: str, pk: Any, *, run: IndexRun) -> None:
    """Index the registered object ``pk`` of the model ``label`` into its collection,
    recording into ``run``; one gone or no longer wanted loses its document instead."""
    entry = _registered(label)
    collection, _ = get_or_create_collection(entry.collection)
    label_run(run, collection)
    external_id = entry.external_id(pk)
    obj, removed = settle(collection, entry, pk)
    if obj is None:
        finish_removal(run, external_id if removed else None)
        return
    ingest(collection, [entry.source(obj)], total=1, run=run)
    # What was read before a change that committed while this embedded is not kept.
    if settle(collection, entry, pk, after_writers=True)[1]:
        run.options = {**run.options, "removed": external_id}
        run.save(update_fields=["options"])


def remove_object(label: str, pk: Any, *, run: IndexRun) -> None:
    """Remove the document of the deleted (or no longer wanted) object ``pk`` of the model
    ``label``, and its chunks, recording into ``run``."""
    entry = _registered(label)
    collection = Collection.objects.filter(name=entry.collection).first()
    label_run(run, collection)
    external_id = entry.external_id(pk)
    deleted = 0
    if collection is not None:
        deleted = delete_documents(collection, collection.documents.filter(external_id=external_id))
    finish_removal(run, external_id if deleted else None)


def _registered(label: str) -> HostIndex:
    entry = registration(label)
    if entry is None:
        raise RetrievalError(f"{label} is not registered with retrieval.host_models")
    return entry


def index_objects(objects: Iterable[Sequence[Any]], *, run: IndexRun) -> IndexRun:
    """Index registered objects ``(model label, pk)`` of one collection again, recording
    into ``run``; those gone or no longer wanted lose their documents (a section's pages
    after a move, a slug change or a new view restriction). Each is settled again once
    written, so a change committed meanwhile wins over what was read before it."""
    objects = [(label, pk) for label, pk in objects]
    entries = [registration(label) for label, _ in objects]
    names = {entry.collection for entry in entries if entry is not None}
    if len(names) != 1:
        raise RetrievalError(f"objects of one registered collection expected, not {names}")
    collection, _ = get_or_create_collection(names.pop())
    label_run(run, collection)
    removed: list[str] = []
    written: list[tuple[HostIndex, Any]] = []

    def sources() -> Iterator[Source]:
        for label, pk in objects:
            entry = registration(label)
            if entry is None or entry.collection != collection.name:
                run.documents_done += 1
                run.documents_failed += 1
                run.errors.append({"document": f"{label}:{pk}", "error": "not registered here"})
                continue
            obj, was_removed = settle(collection, entry, pk)
            if obj is None:
                if was_removed:
                    removed.append(entry.external_id(pk))
                run.documents_done += 1
                continue
            written.append((entry, pk))
            yield entry.source(obj)

    run.options = {**run.options, "removed": removed}
    ingest(collection, sources(), total=len(objects), run=run)
    again = [
        entry.external_id(pk)
        for entry, pk in written
        if settle(collection, entry, pk, after_writers=True)[1]
    ]
    if again:
        run.options = {**run.options, "removed": removed + again}
        run.save(update_fields=["options"])
    return run


def sync_host_documents(collection: Collection) -> None:
    """Add pending documents for registered objects the collection lacks; drop the gone ones
    and those of models no longer registered into it."""
    delete_documents(collection, unregistered_documents(collection))
    for entry in registrations(collection.name):
        prefix = f"{entry.label}:"
        wanted = {
            entry.external_id(obj.pk): obj
            for obj in entry.objects().iterator()
            if entry.condition is None or isinstance(entry.condition, Q) or entry.wants(obj)
        }
        known = set(
            collection.documents.filter(external_id__startswith=prefix).values_list(
                "external_id", flat=True
            )
        )
        Document.objects.bulk_create(
            [
                Document(
                    collection=collection,
                    external_id=key,
                    title=str(obj)[:1000],
                    metadata={"object": entry.object_of(obj)},
                    # nobody, until indexing says who may see it
                    access=None if entry.visibility is None else [],
                )
                for key, obj in wanted.items()
                if key not in known
            ],
            ignore_conflicts=True,
        )
        gone = known - set(wanted)
        if gone:
            delete_documents(collection, collection.documents.filter(external_id__in=gone))


def unregistered_documents(collection: Collection | None = None) -> models.QuerySet:
    """Return the documents of host objects whose model is no longer registered into their
    collection (a narrowed ``WAGTAIL_PAGE_MODELS``, an unregistered model): no save
    updates or hides them any more.

    A host object's document names its model twice, in its external id and in
    ``metadata["object"]`` (the metadata's GIN index finds each installed model's).
    """
    stale = Q(pk__in=[])
    for model in apps.get_models():
        label = model._meta.label_lower
        theirs = Q(
            metadata__contains={"object": {"model": label}}, external_id__startswith=f"{label}:"
        )
        entry = registration(label)
        if entry is not None:
            theirs &= ~Q(collection__name=entry.collection)
        stale |= theirs
    documents = Document.objects.filter(stale)
    return documents if collection is None else documents.filter(collection=collection)


_engine = Engine()
_html = HtmlParser()


def _value(obj: models.Model, spec: TextSpec) -> Any:
    """Evaluate a template (``{{ title }}``), an attribute or method name, or a callable."""
    if callable(spec):
        return spec(obj)
    if "{{" in spec or "{%" in spec:
        return _render(obj, spec)
    value = getattr(obj, spec)
    if callable(value):
        return value()
    field = _field(obj, spec)
    if field is not None and hasattr(field, "get_searchable_content"):
        return _searchable(field, value)
    return value


def text_of(obj: models.Model, spec: TextSpec) -> str:
    """Evaluate ``spec`` as text: markup (a value that is HTML) reduced to its text."""
    value = _value(obj, spec)
    if value is None:
        return ""
    if isinstance(value, _Rendered):
        return str(value)
    if hasattr(value, "__html__"):  # safe strings, rich text, StreamField values
        return html_text(value.__html__())
    return str(value)


class _Rendered(str):
    """A template's output, already reduced to text."""


def _render(obj: models.Model, template: str) -> _Rendered:
    """Render ``template`` with the object's fields, then reduce its markup to text.

    Rendered with autoescaping, so plain field values come out escaped and any ``<``
    left is markup: a field or value that is HTML (``{{ body }}`` on a StreamField, a
    safe string), or the template's own tags. Fields with searchable content (Wagtail's
    StreamField and RichTextField) give that content, as Wagtail's search does.
    """
    fields = {}
    for f in obj._meta.concrete_fields:
        if f.is_relation:
            continue
        value = getattr(obj, f.name)
        fields[f.name] = _searchable(f, value) if hasattr(f, "get_searchable_content") else value
    output = _engine.from_string(template).render(Context({**fields, "object": obj}))
    text = html_text(output) if "<" in output else html.unescape(output)
    return _Rendered(text)


def _searchable(field: models.Field, value: Any) -> str:
    """Return a field's searchable content (no markup) as one text, a line per part."""
    parts = field.get_searchable_content(value)
    return "\n".join(str(p) for p in parts if p is not None and str(p).strip())


def _field(obj: models.Model, name: str) -> models.Field | None:
    try:
        return obj._meta.get_field(name)
    except Exception:
        return None


def html_text(markup: str) -> str:
    """Return the visible text of ``markup``, blocks on their own lines."""
    return _html.parse(markup).text.strip()


def json_value(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
