"""Ingestion: parse → chunk → embed in batches → store, recorded in an IndexRun.

One entry point, :func:`ingest`, serves the commands, the API and the admin.
Embedding happens outside any transaction, batched across documents; each
document's chunks are then replaced in one transaction, so a failure at any step
leaves that document's previous chunks searchable. Knowledge-graph triples of the old
chunks move to new chunks of the same text (:mod:`.triples`).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from django.db import transaction
from django.utils import timezone

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError, RetrievalError
from retrieval.models import Chunk, Collection, Document, IndexRun
from retrieval.services.indexes import outbox
from retrieval.services.ingestion.collections import (
    embedder_for,
    ensure_vector_index,
    lock_embedding_space,
)
from retrieval.services.ingestion.preparation import (
    Preparation,
    PreparedDocument,
    Source,
    chunker_alias,
)
from retrieval.services.ingestion.runs import (
    RunCancelled,
    check_cancelled,
    finish_run,
    save_progress,
)
from retrieval.services.ingestion.triples import attach_kept_triples, detach_kept_triples
from retrieval.services.parsers.budget import beating
from retrieval.services.sparse.index import write_postings
from retrieval.validation.storable import NUL

logger = logging.getLogger(__name__)

Outcome = Literal["indexed", "skipped", "failed"]


@dataclass(frozen=True)
class IngestResult:
    """What happened to one source."""

    external_id: str
    outcome: Outcome
    document_id: int | None = None
    chunks: int = 0
    error: str = ""


#: Called with every IngestResult of the ingestions run inside :func:`listen`.
_listener: ContextVar[Callable[[IngestResult], None] | None] = ContextVar(
    "retrieval_ingest_listener", default=None
)


@contextmanager
def listen(callback: Callable[[IngestResult], None]) -> Iterator[None]:
    """Call ``callback`` with each document's result of ingestions run in this block.

    A command runs a task inline inside it to draw a progress bar without the
    task knowing.
    """
    token = _listener.set(callback)
    try:
        yield
    finally:
        _listener.reset(token)


def ingest(
    collection: Collection,
    sources: Iterable[Source],
    *,
    total: int | None = None,
    force: bool = False,
    on_result: Callable[[IngestResult], None] | None = None,
    created_by: Any = None,
    run: IndexRun | None = None,
) -> IndexRun:
    """Index ``sources`` into ``collection`` and return the finished IndexRun.

    Unchanged sources (same content hash, already indexed) are skipped unless
    ``force``. A source that fails is recorded with its reason and the rest go on.
    ``run`` is a running IndexRun to record into (a task's); by default a new one
    is created. A run cancelled meanwhile stops before its next document.
    """
    options = {
        "collection": collection.name,
        "chunker": chunker_alias(collection),
        "embedder": collection.embedder,
        "force": force,
    }
    if run is None:
        now = timezone.now()
        run = IndexRun.objects.create(
            collection=collection,
            task="ingest",
            options=options,
            status=IndexRun.Status.RUNNING,
            documents_total=total or 0,
            started_at=now,
            heartbeat_at=now,
            created_by=created_by if getattr(created_by, "pk", None) else None,
        )
    else:
        run.options = {**options, **run.options}
        run.documents_total = max(run.documents_total, total or 0)
        run.save(update_fields=["options", "documents_total"])
    indexer = _Indexer(collection, run, force=force, on_result=on_result)
    try:
        ensure_vector_index(collection)
        indexer.run_all(sources)
    except RunCancelled:
        finish_run(run)
        return run
    except BaseException as e:
        finish_run(run, failure=f"Interrupted: {e.__class__.__name__}: {e}")
        raise
    finally:
        outbox.changed(collection)  # the chunk triggers recorded the writes
    finish_run(run)
    return run


class _Indexer:
    """Prepare sources, embed their chunks in shared batches, write documents in groups.

    Writing a group of documents takes a handful of statements in one transaction;
    if it fails, each document of the group is written on its own, so that only the
    one at fault fails.
    """

    #: Sources whose existing documents are looked up in one query.
    LOOKUP_BLOCK = 64
    #: Seconds between two saves of the run's progress.
    PROGRESS_INTERVAL = 0.5

    def __init__(
        self,
        collection: Collection,
        run: IndexRun,
        *,
        force: bool,
        on_result: Callable[[IngestResult], None] | None,
    ) -> None:
        self.collection = collection
        self.run = run
        self.force = force
        self.on_result = on_result or _listener.get()
        self.batch_size = int(retrieval_settings.EMBED_BATCH_SIZE)
        self.preparation: Preparation | None = None
        self.pending: list[PreparedDocument] = []
        self.last_save = 0.0
        #: Per external id: the vectors of its stored chunks, by (header, content), so a
        #: document indexed again embeds only the chunks whose indexed text changed.
        self.stored_vectors: dict[str, dict[tuple[str, str], Any]] = {}

    def run_all(self, sources: Iterable[Source]) -> None:
        self.preparation = Preparation.of(self.collection)  # a bad setting fails the run
        iterator = iter(sources)
        while block := list(itertools.islice(iterator, self.LOOKUP_BLOCK)):
            known = {
                d.external_id: d
                for d in Document.objects.filter(
                    collection=self.collection, external_id__in=[s.external_id for s in block]
                ).only(
                    "pk",
                    "external_id",
                    "content_hash",
                    "status",
                    "title",
                    "metadata",
                    "source_path",
                    "access",
                )
            }
            for source in block:
                self._add(source, known.get(source.external_id))
        self._flush()
        self._save_progress(force=True)

    def _add(self, source: Source, existing: Document | None) -> None:
        check_cancelled(self.run)
        if (
            existing is not None
            and not self.force
            and existing.status == Document.Status.INDEXED
            and existing.content_hash == source.content_hash
            and source.describes(existing)
        ):
            self._record(IngestResult(source.external_id, "skipped", existing.pk))
            return
        try:
            with beating(self._save_progress):  # a long parse (OCR) is not a dead worker
                prepared = self.preparation.prepare(source)
        except Exception as e:  # any reason to fail this one document, named for the user
            self._fail(source, e)
            return
        if existing is not None and not self.force:
            self.stored_vectors[source.external_id] = self._vectors_of(existing)
        self.pending.append(prepared)
        if sum(len(p.rows) for p in self.pending) >= self.batch_size * 4:
            self._flush()

    def _flush(self) -> None:
        """Embed the pending documents' new chunks in shared batches, writing each document
        as soon as its vectors are in, so that a run's progress moves while a long group
        embeds (a 10-document reindex showed 0 / 10 until its one group was written)."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        vectors: list[list[Any]] = []  # per document, its rows' stored vectors or None
        texts: list[str] = []
        for prepared in pending:
            stored = self.stored_vectors.get(prepared.source.external_id, {})
            document_vectors = [
                stored.get((row.indexed_prefix, row.content)) for row in prepared.rows
            ]
            texts += [
                row.indexed_text
                for row, v in zip(prepared.rows, document_vectors, strict=True)
                if v is None
            ]
            vectors.append(document_vectors)
        missing = [sum(vector is None for vector in row) for row in vectors]
        fresh: deque[Any] = deque()
        done = 0
        try:
            for part in itertools.chain(self._embedded(texts), [()]):
                fresh.extend(part)
                ready = []
                while done < len(pending) and missing[done] <= len(fresh):
                    document_vectors = vectors[done]
                    for i, vector in enumerate(document_vectors):
                        if vector is None:
                            document_vectors[i] = fresh.popleft()
                    self.stored_vectors.pop(pending[done].source.external_id, None)
                    ready.append((pending[done], document_vectors))
                    done += 1
                if ready:
                    self._write(ready)
        except Exception as e:
            rest = pending[done:]
            if len(rest) == 1:
                self._fail(rest[0].source, e)
                return
            # Find the document the batch failed on; the others still get indexed.
            for prepared in rest:
                self.pending = [prepared]
                self._flush()

    def _vectors_of(self, document: Document) -> dict[tuple[str, str], Any]:
        """Return the vectors of ``document``'s stored chunks in the collection's space."""
        return {
            (prefix, content): vector
            for prefix, content, vector in Chunk.objects.filter(document_id=document.pk)
            .exclude(embedding=None)
            .values_list("indexed_prefix", "content", "embedding")
            if len(vector) == self.collection.dimensions
        }

    def _embedded(self, texts: Sequence[str]) -> Iterator[np.ndarray]:
        """Yield the vectors of ``texts``, a batch of ``EMBED_BATCH_SIZE`` at a time."""
        embedder = embedder_for(self.collection)
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i : i + self.batch_size]
            vectors = embedder.embed_batch(batch)
            self._save_progress()  # a heartbeat while a long group embeds
            if vectors.shape != (len(batch), self.collection.dimensions):
                raise RetrievalError(
                    f"embedder {self.collection.embedder!r} returned vectors of shape "
                    f"{vectors.shape}, expected ({len(batch)}, {self.collection.dimensions})"
                )
            yield vectors

    def _write(self, group: list[tuple[PreparedDocument, Sequence[Any]]]) -> None:
        try:
            with transaction.atomic():
                documents = self._store(group)
        except Exception as e:
            if len(group) == 1:
                self._fail(group[0][0].source, e)
                return
            for item in group:
                self._write([item])
            return
        for prepared, _ in group:
            document = documents[prepared.source.external_id]
            self._record(
                IngestResult(
                    prepared.source.external_id, "indexed", document.pk, len(prepared.rows)
                )
            )

    def _store(self, group: list[tuple[PreparedDocument, Sequence[Any]]]) -> dict[str, Document]:
        """Replace the documents and chunks of ``group``; call inside a transaction."""
        lock_embedding_space(self.collection)
        now = timezone.now()
        ids = [prepared.source.external_id for prepared, _ in group]
        documents = {
            d.external_id: d
            for d in Document.objects.select_for_update()
            .filter(collection=self.collection, external_id__in=ids)
            .order_by("pk")  # one lock order for concurrent writers
        }
        replaced = [d.pk for d in documents.values()]
        new = []
        for prepared, _ in group:
            source = prepared.source
            document = documents.get(source.external_id)
            if document is None:
                document = Document(collection=self.collection, external_id=source.external_id)
                documents[source.external_id] = document
                new.append(document)
            document.title = prepared.title
            document.mime_type = prepared.mime_type
            document.source_path = source.source_path
            document.content = prepared.parsed.text
            document.content_hash = source.content_hash
            document.metadata = {**prepared.parsed.metadata, **source.metadata}
            if source.access is not None:
                document.access = list(source.access)
            document.status = Document.Status.INDEXED
            document.error = ""
            document.indexed_at = document.updated_at = now
        Document.objects.bulk_create(new)
        Document.objects.bulk_update(
            [d for d in documents.values() if d.pk in replaced], DOCUMENT_FIELDS, batch_size=500
        )
        kept = detach_kept_triples(
            {
                documents[p.source.external_id].pk: p.rows
                for p, _ in group
                if documents[p.source.external_id].pk in replaced
            }
        )
        if replaced:
            Chunk.objects.filter(document_id__in=replaced).delete()
        rows = []
        for prepared, vectors in group:
            document = documents[prepared.source.external_id]
            for row, vector in zip(prepared.rows, vectors, strict=True):
                row.document = document
                row.metadata = dict(document.metadata)
                row.embedding = vector
                rows.append(row)
        Chunk.objects.bulk_create(rows, batch_size=500)
        attach_kept_triples(kept)
        write_postings(
            self.collection.pk,
            (
                (row.pk, *terms)
                for prepared, _ in group
                for row, terms in zip(prepared.rows, prepared.terms, strict=True)
            ),
        )
        return documents

    def _fail(self, source: Source, error: BaseException) -> None:
        reason = str(error) or error.__class__.__name__
        logger.warning("Could not index %s: %s", source.external_id, reason)
        title = (source.title or source.fallback_title).replace(NUL, "\ufffd")[:1000]  # storable
        unreadable = isinstance(error, ParseError) and bool(source.stored_file)
        with transaction.atomic():
            document, created = Document.objects.select_for_update().get_or_create(
                collection=self.collection,
                external_id=source.external_id,
                defaults={"title": title},
            )
            # An indexed document keeps its content, hash and chunks: only the status says
            # the last attempt failed, and a retry with the same bytes is not skipped.
            document.status = Document.Status.FAILED
            document.error = reason
            if created:
                document.source_path = source.source_path
                document.mime_type = source.mime_type or ""
            # A stored upload that cannot be parsed is deleted, unless (under the lock) a
            # newer upload has replaced it meanwhile.
            discard = unreadable and document.source_file.name == source.stored_file
            if discard:
                document.source_file = ""
            document.save()
        if discard:  # at once: kept until a commit, a rolled-back request would leave it
            Document._meta.get_field("source_file").storage.delete(source.stored_file)
        self._record(IngestResult(source.external_id, "failed", document.pk, error=reason))

    def _record(self, result: IngestResult) -> None:
        run = self.run
        run.documents_done += 1
        run.documents_total = max(run.documents_total, run.documents_done)
        if result.outcome == "indexed":
            run.documents_indexed += 1
            run.chunks_written += result.chunks
        elif result.outcome == "skipped":
            run.documents_skipped += 1
        else:
            run.documents_failed += 1
            run.errors.append({"document": result.external_id, "error": result.error})
        self._save_progress(force=result.outcome == "failed")
        if self.on_result is not None:
            self.on_result(result)

    def _save_progress(self, *, force: bool = False) -> None:
        if not force and time.monotonic() - self.last_save < self.PROGRESS_INTERVAL:
            return
        self.last_save = time.monotonic()
        save_progress(self.run)


DOCUMENT_FIELDS = [
    "title",
    "mime_type",
    "source_path",
    "content",
    "content_hash",
    "metadata",
    "access",
    "status",
    "error",
    "indexed_at",
    "updated_at",
]
