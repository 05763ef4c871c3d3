"""Background work: thin tasks taking primary keys, each calling a service.

Never call them or a queue library directly: schedule them with
:func:`retrieval.services.ingestion.runs.enqueue_run`, which records an
:class:`~retrieval.models.IndexRun` and hands the task to the configured queue
(:mod:`retrieval.services.queues`: django-q2 or Django's Tasks framework) or runs it
inline::

    from retrieval.services.ingestion.runs import enqueue_run
    from retrieval.tasks import reindex_collection

    run = enqueue_run(reindex_collection, collection.pk, changed_only=True, collection=collection)

This module is the one list of the app's background work: each function registers
itself by name, ``@recorded`` (work an IndexRun records) or ``@task`` (work without a
run: :func:`evaluate`, :func:`drain_index_outbox`, :func:`sweep_index_runs`,
:func:`watch_index_run`), and services enqueue it by that name, never by path.
"""

from __future__ import annotations

from typing import Any

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Document, IndexRun
from retrieval.services.ingestion import host_registry, reindexing, runs
from retrieval.services.ingestion.runs import execute_run, label_run, recorded
from retrieval.services.queues import task


@recorded
def index_document(document_id: int, *, force: bool = False, run_id: int) -> None:
    """Index one document from its source (an upload, a file, a host object)."""

    def work(run: IndexRun) -> None:
        document = Document.objects.select_related("collection").get(pk=document_id)
        label_run(run, document.collection)
        reindexing.reindex_documents(
            document.collection, [document], run=run, total=1, changed_only=not force
        )

    execute_run(run_id, work)


@recorded
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
        label_run(run, collection)
        remaining = reindexing.not_indexed_since(documents.filter(collection=collection), since)
        remaining = list(remaining.order_by("pk"))
        reindexing.reindex_documents(
            collection, remaining, run=run, total=len(remaining), changed_only=not force
        )

    execute_run(run_id, work)


@recorded
def reindex_collection(
    collection_id: int, *, changed_only: bool = False, since: str | None = None, run_id: int
) -> None:
    """Index every document of a collection again, or only those whose source changed.

    ``since`` (an ISO time) leaves out the documents indexed since then: the resume of
    a run whose worker stopped.
    """

    def work(run: IndexRun) -> None:
        collection = Collection.objects.get(pk=collection_id)
        label_run(run, collection)
        reindexing.reindex_collection(collection, run=run, changed_only=changed_only, since=since)

    execute_run(run_id, work)


@recorded
def reembed_collection(collection_id: int, embedder_alias: str, *, run_id: int) -> None:
    """Move a collection to another embedding space (model or dimensions), then switch."""
    from retrieval.services.ingestion.reembedding import reembed

    def work(run: IndexRun) -> None:
        collection = Collection.objects.get(pk=collection_id)
        label_run(run, collection)
        reembed(collection, embedder_alias, run=run)

    execute_run(run_id, work)


@recorded
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
        label_run(run, collection)
        extract(collection, changed_only=changed_only, extractor=extractor, run=run)

    execute_run(run_id, work)


@recorded
def index_object(model_label: str, object_pk: Any, *, run_id: int) -> None:
    """Index a registered host object (see :mod:`retrieval.host_models`)."""
    execute_run(run_id, lambda run: host_registry.index_object(model_label, object_pk, run=run))


@recorded
def index_objects(objects: list[list[Any]], *, run_id: int) -> None:
    """Index registered host objects ``[model label, pk]`` of one collection again."""
    execute_run(run_id, lambda run: host_registry.index_objects(objects, run=run))


@recorded
def remove_object(model_label: str, object_pk: Any, *, run_id: int) -> None:
    """Remove a deleted (or no longer wanted) host object's document and chunks."""
    execute_run(run_id, lambda run: host_registry.remove_object(model_label, object_pk, run=run))


@task
def evaluate(eval_run_id: int) -> None:
    """Run a queued evaluation (an EvalRun, see services.quality.eval_runs)."""
    from retrieval.services.quality.eval_runs import execute

    execute(eval_run_id)


@task
def drain_index_outbox() -> None:
    """Apply the pending operations of external indexes (see services.indexes.outbox).

    Not an IndexRun: it runs after writes to an external index, and every minute on a
    django-q2 schedule, which retries failed operations once their backoff has passed.
    """
    from retrieval.services.indexes import outbox

    outbox.drain()


@task
def sweep_index_runs() -> None:
    """Mark failed, and resume once, the runs whose worker stopped (every minute on
    django-q2's schedule; see services.ingestion.runs.sweep_stale_runs)."""
    runs.sweep_stale_runs()


@task
def watch_index_run(run_id: int) -> None:
    """Sweep stale runs while a run is active, on a queue without schedules (see
    services.ingestion.runs.watch_run)."""
    runs.watch_run(run_id)
