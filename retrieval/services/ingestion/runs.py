"""IndexRun lifecycle: start, progress with a heartbeat, finish, cancel, stale-run sweep.

A run is ``queued`` when enqueued, ``running`` once a worker takes it, and ends
``succeeded``, ``failed`` or ``cancelled``. Workers save progress every fraction
of a second, and each save is a heartbeat: a running run whose heartbeat is older
than ``RUN_HEARTBEAT_TIMEOUT`` belongs to a worker that died (killed, out of
memory, machine lost) and :func:`sweep_stale_runs` marks it failed, so no run
stays "running" for ever, and resumes it once on the queue: a new run of the same
work that skips what the dead one finished. The sweep runs when a run is enqueued
or starts, when a worker starts, and every minute on a queue with schedules
(:func:`worker_started`), else a heartbeat timeout after each run is enqueued and
then again while it is active (:func:`watch_run`). Cancelling is a status change
the worker reads between documents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Document, IndexRun
from retrieval.services.queues import (
    Work,
    enqueue_after_commit,
    run_now,
    runs_inline,
    schedule_every,
    task,
)
from retrieval.services.registry import queues

logger = logging.getLogger(__name__)

PROGRESS_FIELDS = [
    "documents_done",
    "documents_total",
    "documents_indexed",
    "documents_skipped",
    "documents_failed",
    "chunks_written",
    "errors",
    "heartbeat_at",
]
FINISH_FIELDS = [*PROGRESS_FIELDS, "status", "message", "finished_at"]
ACTIVE = (IndexRun.Status.QUEUED, IndexRun.Status.RUNNING)
#: The work an IndexRun records, by name: functions of :mod:`retrieval.tasks`, each
#: registered there with :func:`recorded`, so that services enqueue them by name and never
#: import the tasks.
RUN_TASKS: dict[str, Callable[..., None]] = {}
#: Tasks whose resume indexes only the documents the dead run had not indexed yet
#: (their ``since`` argument); the others are resumed as they were asked.
RESUMED_SINCE = ("index_documents", "reindex_collection")
#: The task that sweeps stale runs on the queue's workers, every minute.
SWEEP_TASK = "sweep_index_runs"
#: The task that watches one run on a queue without schedules (see :func:`watch_run`).
WATCH_TASK = "watch_index_run"


def recorded(function: Work) -> Work:
    """Register ``function`` (taking ``run_id``) as background work an IndexRun records."""
    RUN_TASKS[function.__name__] = function
    return task(function)


class RunCancelled(RetrievalError):
    """The run was cancelled while it ran; raised between documents to stop it."""


def start_run(run_id: int) -> IndexRun | None:
    """Move a queued run to running and return it; ``None`` if it is not queued.

    A run already cancelled, finished, or taken by another worker (a broker that
    delivered the task twice) is left alone.
    """
    now = timezone.now()
    taken = IndexRun.objects.filter(pk=run_id, status=IndexRun.Status.QUEUED).update(
        status=IndexRun.Status.RUNNING, started_at=now, heartbeat_at=now
    )
    if not taken:
        status = IndexRun.objects.filter(pk=run_id).values_list("status", flat=True).first()
        logger.info("Index run #%s not started: it is %s.", run_id, status or "deleted")
        return None
    return IndexRun.objects.select_related("collection").get(pk=run_id)


def save_progress(run: IndexRun) -> None:
    """Save the run's counters and beat its heart (never its status)."""
    run.heartbeat_at = timezone.now()
    run.save(update_fields=PROGRESS_FIELDS)


def check_cancelled(run: IndexRun) -> None:
    """Raise :class:`RunCancelled` if someone cancelled ``run`` (one indexed read)."""
    if IndexRun.objects.filter(pk=run.pk, status=IndexRun.Status.CANCELLED).exists():
        raise RunCancelled(f"Index run #{run.pk} was cancelled.")


def summary(run: IndexRun) -> str:
    return (
        f"{run.documents_indexed} indexed, {run.documents_skipped} skipped, "
        f"{run.documents_failed} failed, {run.chunks_written} chunks written"
    )


def finish_run(run: IndexRun, *, failure: str = "", counts: str | None = None) -> None:
    """Record the run's end: failed if ``failure`` or any document failed, else succeeded.

    A run cancelled meanwhile stays cancelled, with its counts. ``counts`` replaces
    the default summary of the counters (for runs whose counters mean other things).
    """
    counts = counts if counts is not None else summary(run)
    now = timezone.now()
    run.finished_at = run.heartbeat_at = now
    with transaction.atomic():
        current = (
            IndexRun.objects.select_for_update()
            .filter(pk=run.pk)
            .values_list("status", flat=True)
            .first()
        )
        if current == IndexRun.Status.CANCELLED:
            run.status = IndexRun.Status.CANCELLED
            run.message = f"Cancelled ({counts})"
        else:
            run.status = (
                IndexRun.Status.FAILED
                if failure or run.documents_failed
                else IndexRun.Status.SUCCEEDED
            )
            run.message = f"{failure} ({counts})" if failure else counts
        if run.resumed_from_id is not None:
            resumed = f"Resumed run #{run.resumed_from_id} after its worker stopped."
            run.message = f"{resumed} {run.message}"
        run.save(update_fields=FINISH_FIELDS)


def execute_run(run_id: int, work: Callable[[IndexRun], None]) -> None:
    """Start the queued run ``run_id``, do its ``work``, and end the run whatever happens
    (the body of every task an IndexRun records)."""
    sweep_stale_runs()
    run = start_run(run_id)
    if run is None:
        return
    try:
        work(run)
    except Exception as e:
        logger.exception("Index run #%s failed", run_id)
        run.refresh_from_db(fields=["finished_at"])
        if run.finished_at is None:
            finish_run(run, failure=f"{e.__class__.__name__}: {e}")


def label_run(run: IndexRun, collection: Collection | None) -> None:
    """Record on ``run`` the collection its work turned out to concern."""
    if collection is not None and run.collection_id != collection.pk:
        run.collection = collection
        run.save(update_fields=["collection"])


def finish_removal(run: IndexRun, external_id: str | None) -> None:
    """Finish a run that removed the document ``external_id`` (``None``: there was none)."""
    run.documents_total = run.documents_done = 1
    run.options = {**run.options, "removed": external_id}
    run.save(update_fields=["options"])
    finish_run(run)


def cancel_run(run: IndexRun) -> bool:
    """Cancel a queued or running run; return ``False`` if it had already ended.

    A queued run never starts; a running one stops before its next document,
    keeping what it indexed so far.
    """
    cancelled = IndexRun.objects.filter(pk=run.pk, status__in=ACTIVE).update(
        status=IndexRun.Status.CANCELLED, finished_at=timezone.now(), message="Cancelled."
    )
    run.refresh_from_db()
    return bool(cancelled)


def sweep_stale_runs(*, timeout: float | None = None, resume: bool | None = None) -> list[int]:
    """Mark failed every running run whose worker showed no sign of life for ``timeout`` s.

    Return the ids of the runs marked. Documents such a run indexed stay indexed;
    the one it was writing kept its previous chunks (each write is one transaction).
    With ``resume`` (the default when work runs on the queue's workers) each marked
    run is resumed once (:func:`resume_run`); a resume whose worker died too is not.
    """
    seconds = float(retrieval_settings.RUN_HEARTBEAT_TIMEOUT if timeout is None else timeout)
    resume = not runs_inline() if resume is None else resume
    threshold = timezone.now() - timedelta(seconds=seconds)
    marked = []
    with transaction.atomic():
        stale = (
            IndexRun.objects.select_for_update(skip_locked=True)
            .filter(status=IndexRun.Status.RUNNING)
            .filter(
                Q(heartbeat_at__lt=threshold)
                | Q(heartbeat_at__isnull=True, started_at__lt=threshold)
                | Q(heartbeat_at__isnull=True, started_at__isnull=True, created_at__lt=threshold)
            )
        )
        for run in stale:
            last = run.heartbeat_at or run.started_at or run.created_at
            run.status = IndexRun.Status.FAILED
            run.finished_at = timezone.now()
            resumed = resume_run(run) if resume and run.resumed_from_id is None else None
            then = (
                f"resumed automatically as run #{resumed.pk}."
                if resumed is not None
                else "retry the run to finish it."
            )
            run.message = (
                f"The worker stopped: no progress since {last:%Y-%m-%d %H:%M:%S %Z} "
                f"(RUN_HEARTBEAT_TIMEOUT is {seconds:g} s). {run.documents_done} of "
                f"{run.documents_total} documents were done ({summary(run)}); {then}"
            )
            run.save(update_fields=["status", "finished_at", "message"])
            marked.append(run.pk)
    if marked:
        logger.warning("Marked stale index runs failed: %s", marked)
    return marked


def resume_run(run: IndexRun) -> IndexRun | None:
    """Enqueue the rest of the work of ``run``, whose worker died; return the new run.

    The documents the dead run indexed are not indexed again (``since`` its start);
    other work is asked again as it was. ``None`` when the run's work is unknown.
    """
    task, kwargs = run.options.get("task"), dict(run.options.get("kwargs", {}))
    if task not in RUN_TASKS:
        return None
    if task in RESUMED_SINCE and run.started_at is not None:
        kwargs["since"] = kwargs.get("since") or run.started_at.isoformat()
    return _enqueue(
        task,
        *run.options.get("args", []),
        collection=run.collection,
        created_by=run.created_by,
        resumed_from=run,
        **kwargs,
    )


def worker_started() -> None:
    """Sweep stale runs as a worker starts, and have the queue sweep them every minute."""
    try:
        sweep_stale_runs()
        if queues["default"].supports_schedules:
            schedule_every(SWEEP_TASK, minutes=1, label="retrieval: sweep stale index runs")
    except Exception:  # the worker must start all the same; its first run sweeps again
        logger.exception("Sweeping stale index runs as a worker started failed")


def watch_run(run_id: int) -> None:
    """Sweep stale runs, and come back a heartbeat timeout later while ``run_id`` is active.

    On a queue without schedules (the Tasks framework) nothing else sweeps once a
    worker died: a new worker runs this task, which marks the run failed and resumes it.
    """
    sweep_stale_runs()
    if IndexRun.objects.filter(pk=run_id, status__in=ACTIVE).exists():
        _watch_later(run_id)


def _watch_later(run_id: int) -> None:
    queue = queues["default"]
    if queue.supports_schedules or not queue.supports_defer:
        return
    enqueue_after_commit(
        WATCH_TASK,
        run_id,
        label=f"retrieval: watch run {run_id}",
        delay=float(retrieval_settings.RUN_HEARTBEAT_TIMEOUT),
    )


def enqueue_run(
    task: Callable[..., None] | str,
    *args: Any,
    collection: Collection | None = None,
    created_by: Any = None,
    sync: bool | None = None,
    **kwargs: Any,
) -> IndexRun:
    """Create a queued IndexRun for the task ``task(*args, **kwargs)``, schedule it, return it.

    ``task`` is a function of :mod:`retrieval.tasks` or its name. On the queue's workers
    it is handed over when the current transaction commits (at once outside one), so a
    worker never sees a run or a document that was rolled back; inline (``sync=True``,
    or ``TASKS_SYNC``) it runs now and the finished run is returned. Arguments must be
    JSON-able; ``collection`` and ``created_by`` only label the run.
    """
    name = task if isinstance(task, str) else task.__name__
    if name not in RUN_TASKS:
        raise RetrievalError(f"Unknown task {name!r}; tasks: {', '.join(RUN_TASKS)}.")
    sweep_stale_runs()
    return _enqueue(name, *args, collection=collection, created_by=created_by, sync=sync, **kwargs)


def _enqueue(
    name: str,
    *args: Any,
    collection: Collection | None,
    created_by: Any,
    sync: bool | None = None,
    resumed_from: IndexRun | None = None,
    **kwargs: Any,
) -> IndexRun:
    run = IndexRun.objects.create(
        collection=collection,
        task=name,
        options={"task": name, "args": list(args), "kwargs": kwargs},
        status=IndexRun.Status.QUEUED,
        created_by=created_by if getattr(created_by, "pk", None) else None,
        resumed_from=resumed_from,
        message=(f"Resumes run #{resumed_from.pk}, whose worker stopped." if resumed_from else ""),
    )
    if runs_inline(sync):
        run_now(name, *args, run_id=run.pk, **kwargs)
        run.refresh_from_db()
        return run
    enqueue_after_commit(
        name,
        *args,
        run_id=run.pk,
        label=f"retrieval.{name} run {run.pk}",
        queued=lambda task_id: IndexRun.objects.filter(pk=run.pk).update(task_id=task_id),
        unreachable=lambda message: finish_run(run, failure=message),
        **kwargs,
    )
    _watch_later(run.pk)
    return run


def retry_run(run: IndexRun, *, created_by: Any = None, sync: bool | None = None) -> IndexRun:
    """Enqueue again the documents that failed in ``run``; return the new run.

    A run that failed or was cancelled without per-document errors (a worker that
    died, a cancelled reindex) is enqueued again as it was asked.
    """
    if run.status in ACTIVE:
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
        return enqueue_run(
            "index_documents", ids, collection=run.collection, created_by=created_by, sync=sync
        )
    if run.status == IndexRun.Status.SUCCEEDED or run.options.get("task") not in RUN_TASKS:
        raise RetrievalError(f"Index run #{run.pk} has nothing to retry.")
    return enqueue_run(
        run.options["task"],
        *run.options.get("args", []),
        collection=run.collection,
        created_by=created_by,
        sync=sync,
        **run.options.get("kwargs", {}),
    )
