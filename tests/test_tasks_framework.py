"""The queue seam on Django's Tasks framework: the app's work on any Tasks backend.

Django 6's ``django.tasks`` (the ``django-tasks`` backport on 5.2) with two backends:
the immediate one, in process, and ``django-tasks-db``'s database backend, whose real
worker (``manage.py db_worker``) runs an index run and an evaluation run.
"""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval.models import EvalRun, EvalSet, IndexRun
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.services.quality import goldens
from retrieval.services.quality.eval_runs import create_eval_run
from retrieval.services.queues import runs_inline
from retrieval.services.queues.tasks_framework import framework, run_task
from retrieval.tasks import reindex_collection
from tests.conftest import collection_of
from tests.support.processes import database_url, manage

TASKS_QUEUE = {"BACKEND": "retrieval.services.queues.tasks_framework.TasksFrameworkQueue"}


@pytest.fixture
def tasks_queue(keyword_settings, retrieval_settings, settings):
    """The app's queue is the Tasks framework's, on the backend ``settings.TASKS`` names."""
    retrieval_settings(QUEUES={"default": TASKS_QUEUE}, TASKS_SYNC=False)
    return settings


def test_the_framework_is_django_tasks_on_6_and_the_backport_on_5_2():
    import django

    expected = "django.tasks" if django.VERSION >= (6,) else "django_tasks"
    assert framework().__name__ == expected
    assert run_task.module_path == "retrieval.services.queues.tasks_framework.run_task"


@pytest.mark.django_db
def test_an_immediate_tasks_backend_runs_the_work_through_the_seam(
    tasks_queue, django_capture_on_commit_callbacks
):
    immediate = f"{framework().__name__}.backends.immediate.ImmediateBackend"
    tasks_queue.TASKS = {"default": {"BACKEND": immediate}}
    collection = collection_of("notes", {"a": "North is up.", "b": "East is right."})
    assert not runs_inline()
    with django_capture_on_commit_callbacks(execute=True) as pushed:
        run = enqueue_run(reindex_collection, collection.pk, collection=collection)
        assert run.status == IndexRun.Status.QUEUED  # handed over only on commit
    assert len(pushed) == 1
    run.refresh_from_db()
    assert run.status == IndexRun.Status.SUCCEEDED and run.documents_indexed == 2
    assert run.task_id  # the Tasks framework's result id


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the worker process must see committed rows
def test_a_tasks_database_worker_runs_index_and_evaluation_runs(tasks_queue):
    from django_tasks_db.models import DBTaskResult

    tasks_queue.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    collection = collection_of("notes", {"a": "North is up.", "b": "East is right."})
    eval_set = EvalSet.objects.create(name="gold", collection=collection)
    goldens.judge(eval_set, "north", collection.chunks.get(document__external_id="a"), grade=1)

    run = enqueue_run(reindex_collection, collection.pk, collection=collection)
    evaluation = create_eval_run(eval_set, "default", top_k=10)
    assert DBTaskResult.objects.ready().count() == 2  # enqueued on commit, nothing ran yet
    # and the run's watch, a heartbeat timeout later (it resumes the run if its worker dies)
    later = DBTaskResult.objects.exclude(pk__in=DBTaskResult.objects.ready().values("pk"))
    assert [task.args_kwargs["args"][:2] for task in later] == [
        ["retrieval.tasks.watch_index_run", [run.pk]]
    ]
    run.refresh_from_db()
    assert run.status == IndexRun.Status.QUEUED and run.task_id

    env = {
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "tests.support.tasks_worker_settings",
    }
    done = manage("db_worker", "--batch", "--no-startup-delay", env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    run.refresh_from_db()
    evaluation.refresh_from_db()
    assert run.status == IndexRun.Status.SUCCEEDED, run.message
    assert run.documents_indexed == 2
    assert evaluation.status == EvalRun.Status.SUCCEEDED, evaluation.message
    assert evaluation.metrics["ndcg@10"] == 1.0
