"""Every queue backend through the public suite (retrieval.testing.queues), with the real
libraries: django-q2 (its synchronous mode runs a task as django-q2's worker would) and
the Tasks framework's immediate backend. Real worker processes run them too:
tests/test_worker.py (django-q2's cluster) and tests/test_tasks_framework.py
(django-tasks-db's ``db_worker``)."""

from __future__ import annotations

from retrieval.services.queues.tasks_framework import framework
from retrieval.testing.queues import QueueSuite

TASKS_QUEUE = "retrieval.services.queues.tasks_framework.TasksFrameworkQueue"


class TestDjangoQ2Queue(QueueSuite):
    backend = "retrieval.services.queues.q2.DjangoQ2Queue"

    def prepare(self, request, settings) -> None:
        from django_q.conf import Conf

        # django-q2 reads Q_CLUSTER once, at import: its "sync" mode runs each task as
        # it is handed over, through the same code a worker runs.
        request.getfixturevalue("monkeypatch").setattr(Conf, "SYNC", True)

    def run_pending(self, request) -> None:
        pass  # ran when handed over


class TestTasksFrameworkImmediateQueue(QueueSuite):
    backend = TASKS_QUEUE

    def prepare(self, request, settings) -> None:
        immediate = f"{framework().__name__}.backends.immediate.ImmediateBackend"
        settings.TASKS = {"default": {"BACKEND": immediate}}

    def run_pending(self, request) -> None:
        pass  # the immediate backend runs a task as it is enqueued
