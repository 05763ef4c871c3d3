"""A real django-q2 worker (``manage.py qcluster``) killed in the middle of a reindex.

Nothing indexed is lost, the document being written keeps its previous chunks, the
run does not stay "running", and retrying it on a new worker finishes the job.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import connection

from retrieval.models import Chunk, IndexRun
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexing import Source, ingest
from retrieval.services.runs import enqueue_run, retry_run, sweep_stale_runs
from retrieval.tasks import reindex_collection
from tests.conftest import chunk_ids
from tests.processes import database_url, start_manage

DOCUMENTS = 20


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
def test_a_worker_killed_mid_run_loses_nothing(keyword_settings, retrieval_settings, tmp_path):
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
    env = {
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
        # Embedding calls 1-4 embed documents 0-3, which are then written in one
        # transaction; call 6, for documents 4-7, hangs: the worker is mid-run.
        "RETRIEVAL_TEST_HANG_ON_CALL": "6",
    }
    log = tmp_path / "qcluster.log"
    worker = start_manage("qcluster", env=env, log=log)
    try:
        run = enqueue_run(reindex_collection, collection.pk, collection=collection)
        assert run.status == IndexRun.Status.QUEUED

        def first_group_written() -> bool:
            now = chunk_ids()
            return sum(now[k] != before[k] for k in before) >= 4

        wait_for(first_group_written, timeout=120, what="the first documents", log=log)
        run.refresh_from_db()
        assert run.status == IndexRun.Status.RUNNING
    finally:
        kill(worker)

    # Killed: what was written stays, the documents in flight kept their old chunks.
    after = chunk_ids()
    changed = sorted(k for k in before if after[k] != before[k])
    assert changed == [f"note{i:02}.txt" for i in range(4)]
    assert all(after[k] == before[k] for k in before if k not in changed)
    for chunk in Chunk.objects.select_related("document"):
        assert chunk.content == chunk.document.content[chunk.start : chunk.end]
    run.refresh_from_db()
    assert run.status == IndexRun.Status.RUNNING  # nobody told the database yet

    # The next enqueue, worker start or retrieval_reindex sweeps it: no heartbeat for 1 s.
    wait_for(lambda: run.pk in sweep_stale_runs(), timeout=30, what="the stale-run sweep", log=log)
    run.refresh_from_db()
    assert run.status == IndexRun.Status.FAILED and run.finished_at is not None
    assert "The worker stopped" in run.message

    # Retrying it on a new worker finishes the job.
    worker = start_manage("qcluster", env={**env, "RETRIEVAL_TEST_HANG_ON_CALL": "0"}, log=log)
    try:
        again = retry_run(run)
        assert again.status == IndexRun.Status.QUEUED

        def ended() -> bool:
            again.refresh_from_db()
            return again.status not in (IndexRun.Status.QUEUED, IndexRun.Status.RUNNING)

        wait_for(ended, timeout=120, what="the retried run", log=log)
    finally:
        kill(worker)
    assert again.status == IndexRun.Status.SUCCEEDED, again.message
    assert again.documents_indexed == DOCUMENTS
    final = chunk_ids()
    assert all(final[k] != before[k] and final[k] for k in before)
