"""Start indexing work from the admin: the one place that decides how it runs.

Every admin screen that starts indexing calls :func:`queue_indexing` or
:func:`queue_reindex`. For now they run the synchronous ingestion service in the
request; when background tasks land, only these bodies change (to
``retrieval.tasks.enqueue(...)``), not the screens.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any

from retrieval.models import Collection, Document, IndexRun
from retrieval.services.indexing import Source, ingest

logger = logging.getLogger(__name__)

#: Documents loaded from the database at a time while a collection is reindexed.
BLOCK = 100


def queue_indexing(documents: Iterable[Document], *, user: Any = None) -> list[IndexRun]:
    """Index ``documents`` again from their stored upload (or text); a run per collection."""
    by_collection: dict[int, list[int]] = {}
    for document in documents:
        by_collection.setdefault(document.collection_id, []).append(document.pk)
    runs = []
    for collection_id, ids in by_collection.items():
        collection = Collection.objects.get(pk=collection_id)
        runs.append(ingest(collection, _sources(ids), total=len(ids), force=True, created_by=user))
    return runs


def queue_reindex(collection: Collection, *, user: Any = None) -> IndexRun:
    """Index every document of ``collection`` again."""
    ids = list(collection.documents.order_by("pk").values_list("pk", flat=True))
    return ingest(collection, _sources(ids), total=len(ids), force=True, created_by=user)


def _sources(ids: list[int]) -> Iterator[Source]:
    for i in range(0, len(ids), BLOCK):
        for document in Document.objects.filter(pk__in=ids[i : i + BLOCK]).order_by("pk"):
            source = source_of(document)
            if source is not None:
                yield source


def source_of(document: Document) -> Source | None:
    """Return what to index for ``document``: its stored upload, else its parsed text.

    A stored upload that cannot be read fails the document (with the reason) and
    gives ``None``, so one missing file does not stop a collection's reindex.
    """
    common = {
        "external_id": document.external_id,
        "title": document.title,
        "metadata": dict(document.metadata),
        "source_path": document.source_path,
    }
    if document.source_file:
        try:
            with document.source_file.open("rb") as stored:
                data = stored.read()
        except OSError as e:
            logger.warning("Cannot read the upload of document %s: %s", document.pk, e)
            document.status = Document.Status.FAILED
            document.error = f"The stored file {document.source_file.name} cannot be read: {e}"
            document.save(update_fields=["status", "error", "updated_at"])
            return None
        # The external id of an upload is its original name; storage may have renamed it.
        name = PurePosixPath(document.external_id).name
        if not PurePosixPath(name).suffix:
            name = PurePosixPath(document.source_file.name).name
        return Source(data=data, filename=name, mime_type=document.mime_type or None, **common)
    # Documents ingested from text or from a path on the server: their parsed text.
    return Source(data=document.content.encode("utf-8"), mime_type="text/plain", **common)
