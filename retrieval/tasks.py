"""Background indexing: thin tasks taking primary keys, and one way to schedule them.

Schedule work with :func:`enqueue`; never call ``async_task`` directly::

    from retrieval.tasks import enqueue, reindex_collection

    run = enqueue(reindex_collection, collection.pk, changed_only=True, collection=collection)

``enqueue(task, *args, collection=None, created_by=None, sync=None, **kwargs) -> IndexRun``
creates an :class:`~retrieval.models.IndexRun` in status ``queued`` and

- on django-q2 workers (``manage.py qcluster``): pushes ``task(*args, run_id=run.pk,
  **kwargs)`` to the broker when the current transaction commits (at once outside
  one), so a worker never sees a run or a document that was rolled back;
- inline, when ``sync=True``, or ``RETRIEVAL["TASKS_SYNC"]`` is true, or it is
  ``None`` and django-q2 is not installed: runs the same task now and returns the
  finished run.

``collection`` and ``created_by`` only label the run. Tasks: :func:`index_document`,
:func:`index_documents`, :func:`reindex_collection`, :func:`reembed_collection`,
:func:`index_object`, :func:`remove_object`, :func:`extract_graph`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Document, IndexRun
from retrieval.services import reindexing, runs

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


def index_documents(document_ids: list[int], *, force: bool = True, run_id: int) -> None:
    """Index some documents of one collection again (a retry of those that failed)."""

    def work(run: IndexRun) -> None:
        documents = list(
            Document.objects.select_related("collection").filter(pk__in=document_ids).order_by("pk")
        )
        if not documents:
            raise RetrievalError("none of the documents exists any more")
        collection = documents[0].collection
        _label(run, collection)
        reindexing.reindex_documents(
            collection,
            [d for d in documents if d.collection_id == collection.pk],
            run=run,
            total=len(documents),
            changed_only=not force,
        )

    _execute(run_id, work)


def reindex_collection(collection_id: int, *, changed_only: bool = False, run_id: int) -> None:
    """Index every document of a collection again, or only those whose source changed."""

    def work(run: IndexRun) -> None:
        collection = Collection.objects.get(pk=collection_id)
        _label(run, collection)
        reindexing.reindex_collection(collection, run=run, changed_only=changed_only)

    _execute(run_id, work)


def reembed_collection(collection_id: int, embedder_alias: str, *, run_id: int) -> None:
    """Move a collection to another embedding space (model or dimensions), then switch."""
    from retrieval.services.reembedding import reembed

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
    """Index a registered host object (see :mod:`retrieval.indexing`)."""
    from retrieval.services.collections import get_or_create_collection
    from retrieval.services.hosts import registration
    from retrieval.services.indexing import ingest

    def work(run: IndexRun) -> None:
        entry = registration(model_label)
        if entry is None:
            raise RetrievalError(f"{model_label} is not registered with retrieval.indexing")
        collection, _ = get_or_create_collection(entry.collection)
        _label(run, collection)
        obj = entry.model._default_manager.filter(pk=object_pk).first()
        if obj is None or not entry.wants(obj):
            _remove(run, collection, entry.external_id(object_pk))
            return
        ingest(collection, [entry.source(obj)], total=1, run=run)

    _execute(run_id, work)


def remove_object(model_label: str, object_pk: Any, *, run_id: int) -> None:
    """Remove a deleted (or no longer wanted) host object's document and chunks."""
    from retrieval.services.hosts import registration

    def work(run: IndexRun) -> None:
        entry = registration(model_label)
        if entry is None:
            raise RetrievalError(f"{model_label} is not registered with retrieval.indexing")
        collection = Collection.objects.filter(name=entry.collection).first()
        _label(run, collection)
        _remove(run, collection, entry.external_id(object_pk))

    _execute(run_id, work)


TASKS: dict[str, Callable[..., None]] = {
    task.__name__: task
    for task in (
        index_document,
        index_documents,
        reindex_collection,
        reembed_collection,
        extract_graph,
        index_object,
        remove_object,
    )
}


def drain_index_outbox() -> None:
    """Apply the pending operations of external indexes (see services.indexes.outbox).

    Not an IndexRun: it runs after writes to an external index, and every minute on a
    django-q2 schedule, which retries failed operations once their backoff has passed.
    """
    from retrieval.services.indexes import outbox

    outbox.drain()


def enqueue(
    task: Callable[..., None] | str,
    *args: Any,
    collection: Collection | None = None,
    created_by: Any = None,
    sync: bool | None = None,
    **kwargs: Any,
) -> IndexRun:
    """Create a queued IndexRun for ``task(*args, **kwargs)`` and schedule it; return the run.

    Arguments must be JSON-serialisable (primary keys, flags). See the module docstring.
    """
    name = task if isinstance(task, str) else task.__name__
    if name not in TASKS:
        raise RetrievalError(f"Unknown task {name!r}; tasks: {', '.join(TASKS)}.")
    runs.sweep_stale_runs()
    run = IndexRun.objects.create(
        collection=collection,
        scope=name,
        options={"task": name, "args": list(args), "kwargs": kwargs},
        status=IndexRun.Status.QUEUED,
        created_by=created_by if getattr(created_by, "pk", None) else None,
    )
    if runs_inline(sync):
        TASKS[name](*args, run_id=run.pk, **kwargs)
        run.refresh_from_db()
        return run
    push_after_commit(
        f"retrieval.tasks.{name}",
        *args,
        run_id=run.pk,
        task_name=f"retrieval.{name} run {run.pk}",
        queued=lambda task_id: IndexRun.objects.filter(pk=run.pk).update(task_id=task_id),
        unreachable=lambda message: runs.finish_run(run, failure=message),
        **kwargs,
    )
    return run


def push_after_commit(
    func: str,
    *args: Any,
    task_name: str,
    queued: Callable[[str], Any],
    unreachable: Callable[[str], Any],
    **kwargs: Any,
) -> None:
    """Once the transaction commits, hand ``func(*args, **kwargs)`` to django-q2.

    ``queued`` receives the task id; ``unreachable`` the reason the broker refused it,
    to be said on the run rather than in a 500.
    """
    async_task = _async_task()

    def push() -> None:
        try:
            task_id = async_task(
                func, *args, q_options={"task_name": task_name, "group": "retrieval"}, **kwargs
            )
        except Exception as e:  # the broker is down
            logger.exception("Could not enqueue %s", task_name)
            unreachable(f"Could not reach the task broker: {e}")
            return
        queued(str(task_id))

    transaction.on_commit(push)


def retry(run: IndexRun, *, created_by: Any = None, sync: bool | None = None) -> IndexRun:
    """Enqueue again the documents that failed in ``run``; return the new run.

    A run that failed or was cancelled without per-document errors (a worker that
    died, a cancelled reindex) is enqueued again as it was asked.
    """
    if run.status in runs.ACTIVE:
        raise RetrievalError(f"Index run #{run.pk} is still {run.status}; cancel it first.")
    failed = [error["document"] for error in run.errors if "document" in error]
    if failed:
        ids = list(
            Document.objects.filter(collection=run.collection, external_id__in=failed)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if not ids:
            raise RetrievalError(f"The documents that failed in run #{run.pk} no longer exist.")
        return enqueue(
            index_documents, ids, collection=run.collection, created_by=created_by, sync=sync
        )
    if run.status == IndexRun.Status.SUCCEEDED or run.options.get("task") not in TASKS:
        raise RetrievalError(f"Index run #{run.pk} has nothing to retry.")
    return enqueue(
        run.options["task"],
        *run.options.get("args", []),
        collection=run.collection,
        created_by=created_by,
        sync=sync,
        **run.options.get("kwargs", {}),
    )


def runs_inline(sync: bool | None = None) -> bool:
    """Return whether tasks run in this process rather than on django-q2 workers."""
    if sync is not None:
        return sync
    configured = retrieval_settings.TASKS_SYNC
    if configured is None:
        return not apps.is_installed("django_q")
    return bool(configured)


def _async_task() -> Callable[..., Any]:
    if not apps.is_installed("django_q"):
        raise ImproperlyConfigured(
            'RETRIEVAL["TASKS_SYNC"] is False but "django_q" is not in INSTALLED_APPS: '
            'pip install "django-retrieval[queue]", add "django_q" and a Q_CLUSTER setting, '
            'or set RETRIEVAL["TASKS_SYNC"] = True to index inline.'
        )
    from django_q.tasks import async_task

    return async_task


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


def _remove(run: IndexRun, collection: Collection | None, external_id: str) -> None:
    deleted = 0
    if collection is not None:
        deleted, _ = Document.objects.filter(
            collection=collection, external_id=external_id
        ).delete()
        if deleted and collection.external_index:
            from retrieval.services.indexes import outbox

            outbox.schedule_drain()
    run.documents_total = run.documents_done = 1
    run.options = {**run.options, "removed": external_id if deleted else None}
    run.save(update_fields=["options"])
    runs.finish_run(run)
