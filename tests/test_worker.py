"""A real worker killed in the middle of a reindex: django-q2's (``manage.py qcluster``)
and the Tasks framework's database worker (``manage.py db_worker``).

Nothing indexed is lost, the document being written keeps its previous chunks, and a
new worker marks the run failed and resumes it once by itself, finishing the job.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from retrieval.models import Chunk, Document, IndexRun
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.runs import ACTIVE, enqueue_run
from retrieval.tasks import reindex_collection
from tests.conftest import chunk_ids
from tests.support.processes import database_url, start_manage

DOCUMENTS = 20
#: Each queue's worker command and the settings it runs with.
WORKERS = {
    "django-q2": (["qcluster"], "tests.support.worker_settings"),
    "tasks-db": (
        ["db_worker", "--interval", "0.1", "--no-startup-delay"],
        "tests.support.tasks_worker_settings",
    ),
}
TASKS_QUEUE = {"BACKEND": "retrieval.services.queues.tasks_framework.TasksFrameworkQueue"}


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, log: Path) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` (with the worker's log) if not."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"Timed out waiting for {what}. Worker log:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def kill(worker) -> None:
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    worker.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the worker process must see committed rows
@pytest.mark.parametrize("queue", list(WORKERS))
def test_a_worker_killed_mid_run_loses_nothing_and_a_new_worker_resumes_it(
    queue, keyword_settings, retrieval_settings, settings, tmp_path
):
    command, worker_settings = WORKERS[queue]
    collection = get_or_create_collection("notes")[0]
    paths = []
    for i in range(DOCUMENTS):
        path = tmp_path / f"note{i:02}.txt"
        path.write_text(f"Note {i} points {['north', 'east', 'up'][i % 3]}.")
        paths.append(path)
    ingest(collection, [Source.from_path(p, external_id=p.name) for p in paths])
    before = chunk_ids()
    assert len(before) == DOCUMENTS

    retrieval_settings(TASKS_SYNC=False, RUN_HEARTBEAT_TIMEOUT=1)
    if queue == "tasks-db":
        settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
        retrieval_settings(QUEUES={"default": TASKS_QUEUE})
    env = {
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": worker_settings,
        # Embedding calls 1-5 embed documents 0-4, each written once its vectors are
        # in; call 6, for document 5, hangs: the worker is mid-run.
        "RETRIEVAL_TEST_HANG_ON_CALL": "6",
    }
    log = tmp_path / "worker.log"
    worker = start_manage(*command, env=env, log=log)
    try:
        run = enqueue_run(reindex_collection, collection.pk, collection=collection)
        assert run.status == IndexRun.Status.QUEUED

        def first_group_written() -> bool:
            now = chunk_ids()
            return sum(now[k] != before[k] for k in before) >= 5

        wait_for(first_group_written, timeout=120, what="the first documents", log=log)
        run.refresh_from_db()
        assert run.status == IndexRun.Status.RUNNING
    finally:
        kill(worker)

    # Killed: what was written stays, the documents in flight kept their old chunks.
    after = chunk_ids()
    changed = sorted(k for k in before if after[k] != before[k])
    assert changed == [f"note{i:02}.txt" for i in range(5)]
    assert all(after[k] == before[k] for k in before if k not in changed)
    for chunk in Chunk.objects.select_related("document"):
        assert chunk.content == chunk.document.content[chunk.start : chunk.end]
    run.refresh_from_db()
    assert run.status == IndexRun.Status.RUNNING  # nobody told the database yet

    # A new worker, started at once, sweeps (django-q2: as it starts, then every minute;
    # the Tasks framework: the run's watch task, deferred by the heartbeat timeout): once
    # the run's heartbeat is older than RUN_HEARTBEAT_TIMEOUT it is marked failed and resumed.
    worker = start_manage(*command, env={**env, "RETRIEVAL_TEST_HANG_ON_CALL": "0"}, log=log)
    try:

        def resumed_and_ended() -> bool:
            resume = IndexRun.objects.filter(resumed_from=run).first()
            return resume is not None and resume.status not in ACTIVE

        wait_for(resumed_and_ended, timeout=180, what="the resumed run", log=log)
    finally:
        kill(worker)
    run.refresh_from_db()
    resume = IndexRun.objects.get(resumed_from=run)  # once
    assert run.status == IndexRun.Status.FAILED and run.finished_at is not None
    assert "The worker stopped" in run.message and "RUN_HEARTBEAT_TIMEOUT is 1 s" in run.message
    assert f"resumed automatically as run #{resume.pk}." in run.message
    assert resume.status == IndexRun.Status.SUCCEEDED, resume.message
    assert resume.message.startswith(f"Resumed run #{run.pk} after its worker stopped.")
    assert resume.task == "reindex_collection" and resume.created_by_id == run.created_by_id
    # Only what the killed worker had not finished was indexed again.
    assert (resume.documents_total, resume.documents_indexed) == (DOCUMENTS - 5, DOCUMENTS - 5)
    final = chunk_ids()
    assert all(final[k] != before[k] and final[k] for k in before)
    assert [final[k] for k in changed] == [after[k] for k in changed]
    assert set(Document.objects.values_list("status", flat=True)) == {Document.Status.INDEXED}
