"""Documents users write: sources stored as pending documents, deletions, reindexing.

Each function authorizes the write with the caller's :class:`Scope` first (see
:mod:`retrieval.services.access`), so the API, the admin and the tools share one rule.
Indexing the stored sources is the task's work (:mod:`retrieval.tasks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.files import File
from django.db import transaction
from django.db.models import QuerySet

from retrieval.models import Collection, Document
from retrieval.services.access import Scope
from retrieval.services.indexes import outbox

__all__ = ["Upload", "authorize_documents", "delete_documents", "store_uploads"]


@dataclass(frozen=True)
class Upload:
    """A source to store as a document: a file (or text as a file) and what describes it.

    ``title`` and ``metadata`` of ``None`` keep a replaced document's own.
    """

    external_id: str
    file: File = field(repr=False)
    name: str
    mime_type: str = ""
    title: str | None = None
    metadata: Mapping[str, Any] | None = None
    source_path: str | None = None


def store_uploads(
    collection: Collection, uploads: Sequence[Upload], *, scope: Scope
) -> list[Document]:
    """Store each upload as a pending document of ``collection``, in one transaction.

    A new external id needs the permission to add documents, an existing one to change
    them (it is replaced); either way the collection must be writable and wholly
    visible to the caller, so no write touches or reveals a hidden document. The
    indexed content stays as it is (and searchable) until indexing replaces it.
    """
    ids = [upload.external_id for upload in uploads]
    existing = set(
        Document.objects.filter(collection=collection, external_id__in=ids).values_list(
            "external_id", flat=True
        )
    )
    if len(existing) < len(set(ids)):
        scope.authorize("add", Document, collection)
    if existing:
        scope.authorize("change", Document, collection)
    documents = []
    with transaction.atomic():
        for upload in uploads:
            document, _ = Document.objects.select_for_update().get_or_create(
                collection=collection, external_id=upload.external_id
            )
            document.source_file.save(upload.name, upload.file, save=False)
            document.mime_type = upload.mime_type
            if upload.title is not None:
                document.title = upload.title or document.title
            if upload.metadata is not None:
                document.metadata = dict(upload.metadata)
            if upload.source_path is not None:
                document.source_path = upload.source_path
            document.status, document.error = Document.Status.PENDING, ""
            document.save()
            documents.append(document)
    return documents


def authorize_documents(documents: Iterable[Document], action: str, *, scope: Scope) -> None:
    """Raise ``AccessDenied`` unless ``scope`` may ``action`` every document's collection."""
    collection_ids = {document.collection_id for document in documents}
    for collection in Collection.objects.filter(pk__in=collection_ids):
        scope.authorize(action, Document, collection)


def delete_documents(documents: QuerySet[Document], *, scope: Scope) -> dict[str, int]:
    """Delete ``documents`` with their chunks in one transaction, once authorized.

    Returns the deleted rows per model label; an external index drops the chunks after
    the commit (outbox).
    """
    authorize_documents(documents.only("collection_id"), "delete", scope=scope)
    with transaction.atomic():
        _, deleted = documents.delete()  # chunks and their postings go with them
        outbox.changed()
    return deleted
