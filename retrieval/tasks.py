"""Background work: thin tasks taking primary keys, each calling a service.

Never call them or a queue library directly: schedule them with
:func:`retrieval.services.ingestion.runs.enqueue_run`, which records an
:class:`~retrieval.models.IndexRun` and hands the task to the configured queue
(:mod:`retrieval.services.queues`: django-q2 or Django's Tasks framework) or runs it
inline::

    from retrieval.services.ingestion.runs import enqueue_run
    from retrieval.tasks import reindex_collection

    run = enqueue_run(reindex_collection, collection.pk, changed_only=True, collection=collection)

Tasks: :func:`index_document`, :func:`index_documents`, :func:`reindex_collection`,
:func:`reembed_collection`, :func:`index_object`, :func:`index_objects`,
:func:`remove_object`,
:func:`extract_graph`; and without a run :func:`drain_index_outbox`,
:func:`sweep_index_runs` and :func:`watch_index_run`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Document, IndexRun
from retrieval.services.ingestion import reindexing, runs

logger = logging.getLogger(__name__)


def index_document(document_id: int, *, force: bool = False, run_id: int) -> None:
    """Index one document from its source (an upload, a file, a host object)."""

    def work(run: IndexRun) -> None:
        document = Document.objects.select_related("collection").get(pk=document_id)
        _label(run, document.collection)
        reindexing.reindex_documents(
            document.collection, [document], run=run, total=1, changed_only=not force
        )

    _execute(run_id, work)


def index_documents(
    document_ids: list[int], *, force: bool = True, since: str | None = None, run_id: int
) -> None:
    """Index some documents of one collection again (a retry of those that failed).

    ``since`` (an ISO time) leaves out the documents indexed since then: the resume of
    a run whose worker stopped.
    """

    def work(run: IndexRun) -> None:
        documents = Document.objects.select_related("collection").filter(pk__in=document_ids)
        first = documents.order_by("pk").first()
        if first is None:
            raise RetrievalError("none of the documents exists any more")
        collection = first.collection
        _label(run, collection)
        remaining = reindexing.not_indexed_since(documents.filter(collection=collection), since)
        remaining = list(remaining.order_by("pk"))
        reindexing.reindex_documents(
            collection, remaining, run=run, total=len(remaining), changed_only=not force
        )

    _execute(run_id, work)


def reindex_collection(
    collection_id: int, *, changed_only: bool = False, since: str | None = None, run_id: int
) -> None:
    """Index every document of a collection again, or only those whose source changed.

    ``since`` (an ISO time) leaves out the documents indexed since then: the resume of
    a run whose worker stopped.
    """

    def work(run: IndexRun) -> None:
        collection = Collection.objects.get(pk=collection_id)
        _label(run, collection)
        reindexing.reindex_collection(collection, run=run, changed_only=changed_only, since=since)

    _execute(run_id, work)


def reembed_collection(collection_id: int, embedder_alias: str, *, run_id: int) -> None:
    """Move a collection to another embedding space (model or dimensions), then switch."""
    from retrieval.services.ingestion.reembedding import reembed

    def work(run: IndexRun) -> None:
        collection = Collection.objects.get(pk=collection_id)
        _label(run, collection)
        reembed(collection, embedder_alias, run=run)

    _execute(run_id, work)


def extract_graph(
    collection_id: int,
    *,
    changed_only: bool = False,
    extractor: str | None = None,
    run_id: int,
) -> None:
    """Extract a collection's knowledge-graph triples (only changed chunks, if asked)."""
    from retrieval.services.graph.extraction import extract_graph as extract

    def work(run: IndexRun) -> None:
        collection = Collection.objects.get(pk=collection_id)
        _label(run, collection)
        extract(collection, changed_only=changed_only, extractor=extractor, run=run)

    _execute(run_id, work)


def index_object(model_label: str, object_pk: Any, *, run_id: int) -> None:
    """Index a registered host object (see :mod:`retrieval.host_models`)."""
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.host_registry import registration, settle
    from retrieval.services.ingestion.ingest import ingest

    def work(run: IndexRun) -> None:
        entry = registration(model_label)
        if entry is None:
            raise RetrievalError(f"{model_label} is not registered with retrieval.host_models")
        collection, _ = get_or_create_collection(entry.collection)
        _label(run, collection)
        external_id = entry.external_id(object_pk)
        obj, removed = settle(collection, entry, object_pk)
        if obj is None:
            _removed(run, external_id if removed else None)
            return
        ingest(collection, [entry.source(obj)], total=1, run=run)
        # What was read before a change that committed while this embedded is not kept.
        if settle(collection, entry, object_pk, after_writers=True)[1]:
            run.options = {**run.options, "removed": external_id}
            run.save(update_fields=["options"])

    _execute(run_id, work)


def index_objects(objects: list[list[Any]], *, run_id: int) -> None:
    """Index registered host objects ``[model label, pk]`` of one collection again."""
    from retrieval.services.ingestion import host_registry
    from retrieval.services.ingestion.collections import get_or_create_collection

    def work(run: IndexRun) -> None:
        entries = [host_registry.registration(label) for label, _ in objects]
        names = {entry.collection for entry in entries if entry is not None}
        if len(names) != 1:
            raise RetrievalError(f"objects of one registered collection expected, not {names}")
        collection, _ = get_or_create_collection(names.pop())
        _label(run, collection)
        host_registry.index_objects(collection, [(label, pk) for label, pk in objects], run=run)

    _execute(run_id, work)


def remove_object(model_label: str, object_pk: Any, *, run_id: int) -> None:
    """Remove a deleted (or no longer wanted) host object's document and chunks."""
    from retrieval.services.ingestion.host_registry import delete_documents, registration

    def work(run: IndexRun) -> None:
        entry = registration(model_label)
        if entry is None:
            raise RetrievalError(f"{model_label} is not registered with retrieval.host_models")
        collection = Collection.objects.filter(name=entry.collection).first()
        _label(run, collection)
        external_id = entry.external_id(object_pk)
        deleted = 0
        if collection is not None:
            documents = collection.documents.filter(external_id=external_id)
            deleted = delete_documents(collection, documents)
        _removed(run, external_id if deleted else None)

    _execute(run_id, work)


#: The tasks an IndexRun records (their names are ``services.runs.RUN_TASKS``).
TASKS: dict[str, Callable[..., None]] = {
    task.__name__: task
    for task in (
        index_document,
        index_documents,
        reindex_collection,
        reembed_collection,
        extract_graph,
        index_object,
        index_objects,
        remove_object,
    )
}


def evaluate(eval_run_id: int) -> None:
    """Run a queued evaluation (an EvalRun, see services.eval_runs)."""
    from retrieval.services.quality.eval_runs import execute

    execute(eval_run_id)


def drain_index_outbox() -> None:
    """Apply the pending operations of external indexes (see services.indexes.outbox).

    Not an IndexRun: it runs after writes to an external index, and every minute on a
    django-q2 schedule, which retries failed operations once their backoff has passed.
    """
    from retrieval.services.indexes import outbox

    outbox.drain()


def sweep_index_runs() -> None:
    """Mark failed, and resume once, the runs whose worker stopped (every minute on
    django-q2's schedule; see services.ingestion.runs.sweep_stale_runs)."""
    runs.sweep_stale_runs()


def watch_index_run(run_id: int) -> None:
    """Sweep stale runs while a run is active, on a queue without schedules (see
    services.ingestion.runs.watch_run)."""
    runs.watch_run(run_id)


def _execute(run_id: int, work: Callable[[IndexRun], None]) -> None:
    """Start the run, do the work, and make sure the run ends whatever happens."""
    runs.sweep_stale_runs()
    run = runs.start_run(run_id)
    if run is None:
        return
    try:
        work(run)
    except Exception as e:
        logger.exception("Index run #%s failed", run_id)
        run.refresh_from_db(fields=["finished_at"])
        if run.finished_at is None:
            runs.finish_run(run, failure=f"{e.__class__.__name__}: {e}")


def _label(run: IndexRun, collection: Collection | None) -> None:
    if collection is not None and run.collection_id != collection.pk:
        run.collection = collection
        run.save(update_fields=["collection"])


def _removed(run: IndexRun, external_id: str | None) -> None:
    """Finish a run that removed the document ``external_id`` (``None``: there was none)."""
    run.documents_total = run.documents_done = 1
    run.options = {**run.options, "removed": external_id}
    run.save(update_fields=["options"])
    runs.finish_run(run)
