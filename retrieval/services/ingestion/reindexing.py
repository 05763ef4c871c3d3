"""Index again what is already stored: one document, some documents, a whole collection.

A document's source is, in this order: its host object (a registered model, see
:mod:`~retrieval.services.ingestion.host_registry`), its stored ``source_file``, the local
file at its ``source_path``, or else its own parsed ``content`` as plain text (structure
such as PDF pages is then not re-derived).

Indexing documents again keeps the knowledge-graph triples of chunks whose text is
unchanged (:mod:`~retrieval.services.ingestion.triples`); in a collection with a graph,
a changed-only graph extraction of the new texts is queued once the documents are written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from django.db.models import Q, QuerySet

from retrieval.models import Collection, Document, GraphExtraction, IndexRun
from retrieval.services.ingestion.host_registry import source_for_document, sync_host_documents
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.runs import enqueue_run, save_progress

#: The task names of graph extraction runs: queued by name, or started by the service.
GRAPH_TASKS = ("extract_graph", "graph")


def document_source(document: Document) -> Source | None:
    """Return the source to re-read ``document`` from; ``None`` when only its content is left."""
    hosted = source_for_document(document)
    if hosted is not None:
        return hosted
    if document.source_file:
        with document.source_file.open("rb") as handle:
            data = handle.read()
        return Source(
            external_id=document.external_id,
            data=data,
            filename=Path(document.source_file.name).name,
            mime_type=document.mime_type or None,
            title=document.title,
            metadata=dict(document.metadata),
            stored_file=document.source_file.name,
        )
    path = Path(document.source_path) if document.source_path else None
    if path is not None and path.is_file():
        source = Source.from_path(
            path, external_id=document.external_id, metadata=dict(document.metadata)
        )
        return replace(source, title=document.title)
    return None


def content_source(document: Document) -> Source:
    """Return the document's own parsed text as a plain-text source."""
    return Source(
        external_id=document.external_id,
        data=document.content.encode("utf-8"),
        mime_type="text/plain",
        title=document.title,
        metadata=dict(document.metadata),
        source_path=document.source_path,
    )


def reindex_documents(
    collection: Collection,
    documents: Iterable[Document],
    *,
    run: IndexRun,
    total: int,
    changed_only: bool = False,
) -> IndexRun:
    """Index ``documents`` again from their sources, recording into ``run``.

    With ``changed_only`` a document is skipped when it is indexed and its source
    still has the hash it was indexed from (or it has no source but its content).
    Otherwise every document is parsed, chunked and embedded again. When a document
    was written, a collection with a knowledge graph gets its new texts extracted.
    """
    run.documents_total = total
    save_progress(run)

    def sources() -> Iterator[Source]:
        for document in documents:
            try:
                source = document_source(document)
            except OSError as e:  # a lost upload fails its document, not the whole run
                reason = f"The stored file {document.source_file.name} cannot be read: {e}"
                document.status, document.error = Document.Status.FAILED, reason
                document.save(update_fields=["status", "error", "updated_at"])
                run.documents_done += 1
                run.documents_failed += 1
                run.errors.append({"document": document.external_id, "error": reason})
                continue
            if source is None:
                if changed_only and document.status == Document.Status.INDEXED:
                    run.documents_done += 1
                    run.documents_skipped += 1
                    continue
                source = content_source(document)
            yield source

    ingest(collection, sources(), total=total, force=not changed_only, run=run)
    if run.documents_indexed and run.status != IndexRun.Status.CANCELLED:
        _queue_graph_extraction(collection, run)
    return run


def _queue_graph_extraction(collection: Collection, run: IndexRun) -> None:
    """Queue a changed-only graph extraction of ``collection`` if it has a knowledge graph.

    The extractor is the one of the collection's latest extraction, so only texts it never
    read are extracted; chunks of texts read before get their triples back from the
    extraction records. ``run``, which wrote the new chunks, names the extraction's run.
    """
    if not GraphExtraction.objects.filter(collection=collection).exists():
        return
    extractor = (
        IndexRun.objects.filter(
            collection=collection, task__in=GRAPH_TASKS, options__has_key="extractor"
        )
        .order_by("-pk")
        .values_list("options__extractor", flat=True)
        .first()
    )
    graph_run = enqueue_run(
        "extract_graph",
        collection.pk,
        changed_only=True,
        extractor=extractor,
        collection=collection,
        created_by=run.created_by,
    )
    run.options = {**run.options, "graph_run": graph_run.pk}
    run.message += (
        f"; graph extraction of the changed chunks: index run #{graph_run.pk} {graph_run.status}"
    )
    run.save(update_fields=["options", "message"])


def not_indexed_since(documents: QuerySet[Document], since: str | None) -> QuerySet[Document]:
    """Leave out of ``documents`` those indexed at or after ``since`` (an ISO time), if given."""
    if since is None:
        return documents
    moment = datetime.fromisoformat(since)
    return documents.filter(Q(indexed_at__isnull=True) | Q(indexed_at__lt=moment))


def reindex_collection(
    collection: Collection,
    *,
    run: IndexRun,
    changed_only: bool = False,
    since: str | None = None,
) -> IndexRun:
    """Index a whole collection again, first bringing registered host objects in step.

    ``since`` (an ISO time) leaves out the documents indexed since then: what a run
    whose worker stopped had finished.
    """
    sync_host_documents(collection)
    documents = not_indexed_since(collection.documents.all(), since).order_by("pk")
    return reindex_documents(
        collection,
        documents.iterator(chunk_size=200),
        run=run,
        total=documents.count(),
        changed_only=changed_only,
    )


def discard_new_document(document: Document) -> None:
    """Delete a document first stored by a request whose indexing failed, and its file.

    Kept if another request has stored a newer file for it since (the name differs).
    """
    name = document.source_file.name
    deleted, _ = Document.objects.filter(pk=document.pk, source_file=name).delete()
    if deleted and name:
        document.source_file.storage.delete(name)
