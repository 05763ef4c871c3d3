"""An evaluation run queued from the admin's service runs on a real django-q2 worker."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval.models import Chunk, EvalRun, EvalSet
from retrieval.services.quality import goldens
from retrieval.services.quality.eval_runs import create_eval_run
from tests.conftest import collection_of
from tests.support.processes import database_url, start_manage
from tests.test_worker import kill, wait_for


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the worker process must see committed rows
def test_a_queued_eval_run_is_run_by_a_worker_like_inline(
    keyword_settings, retrieval_settings, tmp_path
):
    atlas = collection_of("atlas", {"river": "the river runs north", "hill": "up the hill"})
    eval_set = EvalSet.objects.create(name="gold", collection=atlas)
    for query, document in (("hill", "hill"), ("river north", "river")):
        chunk = Chunk.objects.get(document__external_id=document)
        goldens.judge(eval_set, query, chunk, grade=1)
    inline = create_eval_run(eval_set, "default", sync=True)
    assert inline.status == EvalRun.Status.SUCCEEDED, inline.message

    retrieval_settings(TASKS_SYNC=False)
    env = {
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "tests.support.worker_settings",
    }
    log = tmp_path / "qcluster.log"
    worker = start_manage("qcluster", env=env, log=log)
    try:
        queued = create_eval_run(eval_set, "default")
        assert queued.status == EvalRun.Status.QUEUED and queued.queries_done == 0

        def ended() -> bool:
            queued.refresh_from_db()
            return queued.status not in (EvalRun.Status.QUEUED, EvalRun.Status.RUNNING)

        wait_for(ended, timeout=120, what="the eval run", log=log)
    finally:
        kill(worker)
    assert queued.status == EvalRun.Status.SUCCEEDED, queued.message
    assert queued.task_id and queued.queries_done == queued.queries_total == 2
    for name in ("ndcg@10", "recall@100", "mrr@10", "map@100"):
        assert queued.metrics[name] == pytest.approx(inline.metrics[name])
