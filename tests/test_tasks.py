"""Indexing tasks run inline (TASKS_SYNC) and queued: runs, reindex, cancel, retry, sweep."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.utils import timezone

from retrieval import tasks
from retrieval.models import Collection, Document, IndexRun
from retrieval.services import queues
from retrieval.services.ingestion import runs
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.runs import cancel_run, sweep_stale_runs
from tests.conftest import chunk_ids

pytestmark = pytest.mark.django_db

WORDS = ["north", "east", "up"]


@pytest.fixture
def collection(keyword_settings) -> Collection:
    return get_or_create_collection("notes")[0]


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    paths = []
    for i in range(10):
        path = tmp_path / f"note{i:02}.txt"
        path.write_text(f"Note {i} points {WORDS[i % 3]}.")
        paths.append(path)
    return paths


def ingest_files(collection: Collection, paths: list[Path]) -> IndexRun:
    return ingest(collection, [Source.from_path(p, external_id=p.name) for p in paths])


def test_enqueue_inline_runs_the_task_and_returns_the_finished_run(collection, files):
    ingest_files(collection, files)
    before = chunk_ids()
    run = runs.enqueue_run(tasks.reindex_collection, collection.pk, collection=collection)
    assert run.status == IndexRun.Status.SUCCEEDED and run.task == "reindex_collection"
    assert (run.documents_total, run.documents_done, run.documents_indexed) == (10, 10, 10)
    assert run.options["task"] == "reindex_collection" and run.options["args"] == [collection.pk]
    assert run.started_at <= run.heartbeat_at <= run.finished_at
    after = chunk_ids()
    assert set(after) == set(before) and all(after[k] != before[k] for k in before)


def test_changed_only_reindexes_what_changed_on_disk_and_what_failed(
    collection, files, retrieval_settings
):
    ingest_files(collection, files)
    before = chunk_ids()
    files[3].write_text("Note 3 now points east and up.")
    Document.objects.filter(external_id="note05.txt").update(status=Document.Status.FAILED)
    run = runs.enqueue_run(
        tasks.reindex_collection, collection.pk, changed_only=True, collection=collection
    )
    assert (run.documents_indexed, run.documents_skipped) == (2, 8)
    after = chunk_ids()
    changed = {k for k in before if after[k] != before[k]}
    assert changed == {"note03.txt", "note05.txt"}
    assert (
        Document.objects.get(external_id="note03.txt").content == "Note 3 now points east and up."
    )


def test_a_queued_run_cancelled_never_starts(collection, files):
    ingest_files(collection, files)
    before = chunk_ids()
    run = IndexRun.objects.create(collection=collection, task="reindex_collection")
    assert cancel_run(run) and run.status == IndexRun.Status.CANCELLED
    tasks.reindex_collection(collection.pk, run_id=run.pk)  # the worker takes it anyway
    run.refresh_from_db()
    assert run.status == IndexRun.Status.CANCELLED and run.started_at is None
    assert chunk_ids() == before
    assert not cancel_run(run)  # already ended


def test_a_running_run_cancelled_stops_before_its_next_document(
    collection, files, retrieval_settings
):
    ingest_files(collection, files)
    before = chunk_ids()
    # One text per embedding call: documents are embedded four at a time, then written.
    # The second call cancels the run, so the first four are written and no more.
    retrieval_settings(
        EMBEDDERS={
            "default": {
                "BACKEND": "tests.support.embedders.CancellingEmbedder",
                "OPTIONS": {"cancel_on_call": 2},
            }
        },
        EMBED_BATCH_SIZE=1,
    )
    run = runs.enqueue_run(tasks.reindex_collection, collection.pk, collection=collection)
    assert run.status == IndexRun.Status.CANCELLED
    assert run.documents_indexed == 4 and run.message.startswith("Cancelled (4 indexed")
    after = chunk_ids()
    changed = sorted(k for k in before if after[k] != before[k])
    assert changed == [f"note{i:02}.txt" for i in range(4)]
    assert all(after[k] for k in before)  # every document still has its chunks


def test_retry_enqueues_only_the_documents_that_failed(collection, files, retrieval_settings):
    retrieval_settings(EMBEDDERS={"default": {"BACKEND": "tests.support.embedders.PoisonEmbedder"}})
    files[2].write_text("Note 2 is poison.")
    files[7].write_text("Note 7 is poison too.")
    first = ingest_files(collection, files)
    assert first.documents_failed == 2
    with pytest.raises(tasks.RetrievalError, match="has nothing to retry"):
        runs.retry_run(runs.enqueue_run(tasks.index_document, Document.objects.first().pk))
    files[2].write_text("Note 2 is harmless now.")
    again = runs.retry_run(first)
    assert again.task == "index_documents" and again.documents_total == 2
    assert (again.documents_indexed, again.documents_failed) == (1, 1)
    assert [e["document"] for e in again.errors] == ["note07.txt"]
    assert Document.objects.get(external_id="note02.txt").status == Document.Status.INDEXED
    files[7].write_text("Note 7 is fine.")
    last = runs.retry_run(again)
    assert last.documents_total == 1 and last.status == IndexRun.Status.SUCCEEDED


def test_a_run_whose_worker_stopped_is_marked_failed_by_the_sweep(collection, files):
    ingest_files(collection, files)
    long_ago = timezone.now() - timedelta(hours=1)
    dead = IndexRun.objects.create(
        collection=collection,
        task="reindex_collection",
        status=IndexRun.Status.RUNNING,
        started_at=long_ago,
        heartbeat_at=long_ago,
        documents_total=10,
        documents_done=3,
    )
    alive = IndexRun.objects.create(
        collection=collection,
        task="reindex_collection",
        status=IndexRun.Status.RUNNING,
        started_at=long_ago,
        heartbeat_at=timezone.now(),
    )
    assert sweep_stale_runs() == [dead.pk]
    dead.refresh_from_db()
    assert dead.status == IndexRun.Status.FAILED and dead.finished_at is not None
    assert "The worker stopped" in dead.message and "3 of 10 documents" in dead.message
    alive.refresh_from_db()
    assert alive.status == IndexRun.Status.RUNNING
    # Retrying an interrupted run without per-document errors runs the task again.
    dead.options = {"task": "reindex_collection", "args": [collection.pk], "kwargs": {}}
    dead.save()
    assert runs.retry_run(dead).documents_indexed == 10


def dead_run(collection: Collection, **fields) -> IndexRun:
    """A run left "running" by a worker that died an hour ago."""
    long_ago = timezone.now() - timedelta(hours=1)
    options = {"task": "reindex_collection", "args": [collection.pk], "kwargs": {}}
    return IndexRun.objects.create(
        **{
            "collection": collection,
            "task": "reindex_collection",
            "options": options,
            "status": IndexRun.Status.RUNNING,
            "started_at": long_ago,
            "heartbeat_at": long_ago,
            **fields,
        }
    )


def test_on_workers_the_sweep_resumes_a_dead_run_once_with_what_it_had_not_indexed(
    collection, files, retrieval_settings, django_capture_on_commit_callbacks
):
    ingest_files(collection, files)
    dead = dead_run(collection, documents_total=10, documents_done=3)
    # The dead worker indexed notes 0-2 after it started; the others are older.
    Document.objects.exclude(external_id__in=[f"note0{i}.txt" for i in range(3)]).update(
        indexed_at=dead.started_at - timedelta(hours=1)
    )
    before = chunk_ids()
    retrieval_settings(TASKS_SYNC=False)

    with django_capture_on_commit_callbacks(execute=False) as pushes:
        assert sweep_stale_runs() == [dead.pk]
    assert len(pushes) == 1  # the resume, handed to the queue on commit
    dead.refresh_from_db()
    resume = IndexRun.objects.get(resumed_from=dead)
    assert dead.status == IndexRun.Status.FAILED
    assert dead.message.endswith(f"resumed automatically as run #{resume.pk}.")
    assert resume.status == IndexRun.Status.QUEUED and resume.task == "reindex_collection"
    assert resume.message == f"Resumes run #{dead.pk}, whose worker stopped."
    assert resume.options["kwargs"] == {"since": dead.started_at.isoformat()}

    tasks.reindex_collection(collection.pk, **resume.options["kwargs"], run_id=resume.pk)
    resume.refresh_from_db()
    assert resume.status == IndexRun.Status.SUCCEEDED, resume.message
    assert resume.message.startswith(f"Resumed run #{dead.pk} after its worker stopped. 7 ")
    assert (resume.documents_total, resume.documents_indexed) == (7, 7)
    after = chunk_ids()
    assert [k for k in before if after[k] != before[k]] == [f"note0{i}.txt" for i in range(3, 10)]

    # A resume whose worker died too is not resumed again: someone should look.
    IndexRun.objects.filter(pk=resume.pk).update(
        status=IndexRun.Status.RUNNING, heartbeat_at=dead.heartbeat_at, finished_at=None
    )
    assert sweep_stale_runs() == [resume.pk]
    resume.refresh_from_db()
    assert resume.status == IndexRun.Status.FAILED and not resume.resumes.exists()
    assert resume.message.endswith("retry the run to finish it.")


def test_a_django_q2_worker_sweeps_as_it_starts_and_schedules_the_sweep(
    collection, retrieval_settings, django_capture_on_commit_callbacks
):
    from django_q.models import Schedule
    from django_q.signals import post_spawn

    retrieval_settings(TASKS_SYNC=False)
    dead = dead_run(collection)
    with django_capture_on_commit_callbacks(execute=False):
        post_spawn.send(sender="django_q", proc_name="Process-1")  # as each worker starts
    dead.refresh_from_db()
    assert dead.status == IndexRun.Status.FAILED and dead.resumes.count() == 1
    schedule = Schedule.objects.get(func="retrieval.tasks.sweep_index_runs")
    assert (schedule.schedule_type, schedule.minutes) == (Schedule.MINUTES, 1)

    later = dead_run(collection)  # what the schedule's task finds a minute on
    with django_capture_on_commit_callbacks(execute=False):
        tasks.sweep_index_runs()
    later.refresh_from_db()
    assert later.status == IndexRun.Status.FAILED and later.resumes.count() == 1


def test_enqueue_on_workers_pushes_to_the_broker_on_commit(
    collection, files, retrieval_settings, django_capture_on_commit_callbacks
):
    from django_q.models import OrmQ

    ingest_files(collection, files)
    retrieval_settings(TASKS_SYNC=False)
    document = Document.objects.get(external_id="note01.txt")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = runs.enqueue_run(tasks.index_document, document.pk, force=True, collection=collection)
        assert run.status == IndexRun.Status.QUEUED and not OrmQ.objects.exists()
    assert len(callbacks) == 1
    callbacks[0]()  # the commit
    run.refresh_from_db()
    queued = OrmQ.objects.get()
    assert run.task_id and queued.task_id() == run.task_id
    assert queued.task["func"] == "retrieval.tasks.index_document"
    assert queued.task["kwargs"] == {"force": True, "run_id": run.pk}
    # What the worker then runs:
    tasks.index_document(document.pk, force=True, run_id=run.pk)
    run.refresh_from_db()
    assert run.status == IndexRun.Status.SUCCEEDED and run.documents_indexed == 1


def test_without_django_q_tasks_run_inline_or_say_what_to_install(
    collection, settings, retrieval_settings
):
    from django.core import checks

    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django_q"]
    assert queues.runs_inline() is True
    run = runs.enqueue_run(tasks.reindex_collection, collection.pk)
    assert run.status == IndexRun.Status.SUCCEEDED
    retrieval_settings(TASKS_SYNC=False)
    with pytest.raises(ImproperlyConfigured, match=r"django-retrieval\[queue\]"):
        runs.enqueue_run(tasks.reindex_collection, collection.pk)
    assert "retrieval.E015" in [e.id for e in checks.run_checks()]


def test_unknown_task_is_refused(collection):
    with pytest.raises(tasks.RetrievalError, match="Unknown task 'summarise'; tasks: index_doc"):
        runs.enqueue_run("summarise", collection.pk)


def test_reindex_command_sync_and_queued(collection, files, retrieval_settings, capsys):
    from io import StringIO

    from django.core.management import CommandError

    ingest_files(collection, files)
    out = StringIO()
    call_command("retrieval_reindex", "--collection", "notes", "--sync", stdout=out)
    assert "notes: IndexRun #" in out.getvalue()
    assert "succeeded: 10 indexed, 0 skipped, 0 failed" in out.getvalue()
    out = StringIO()
    call_command("retrieval_reindex", "--changed-only", "--sync", stdout=out)
    assert "0 indexed, 10 skipped" in out.getvalue()
    # A reindex of every collection created those of the host app's registered models.
    existing = "blog, notes, stories"
    with pytest.raises(CommandError, match=f"No collection named 'nope'; existing: {existing}"):
        call_command("retrieval_reindex", "--collection", "nope", stdout=StringIO())
    retrieval_settings(TASKS_SYNC=False)
    out = StringIO()
    call_command("retrieval_reindex", stdout=out)
    assert "notes: queued IndexRun #" in out.getvalue()
    assert (
        IndexRun.objects.filter(status=IndexRun.Status.QUEUED).count() == 3
    )  # blog, notes, stories
