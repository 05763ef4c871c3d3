"""The queue suite: work handed to a queue backend on commit runs, and its runs end.

A backend is configured as ``RETRIEVAL["QUEUES"]["default"]``; :meth:`QueueSuite.run_pending`
makes the backend's workers run what is pending (a real worker, a batch command, or
nothing for a backend that runs work as it is handed over).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from retrieval.models import EvalRun, EvalSet, IndexRun
from retrieval.services import goldens
from retrieval.services.collections import get_or_create_collection
from retrieval.services.eval_runs import create_eval_run
from retrieval.services.indexing import Source, ingest
from retrieval.services.queues import runs_inline
from retrieval.services.registry import queues
from retrieval.services.runs import enqueue_run
from retrieval.testing.base import KEYWORD_EMBEDDER, Suite, configure

__all__ = ["QueueSuite"]


class QueueSuite(Suite):
    """The ``BaseQueue`` contract. Set ``backend`` and ``options``, and define
    :meth:`run_pending`."""

    pytestmark = pytest.mark.django_db
    backend: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}

    def run_pending(self, request: pytest.FixtureRequest) -> None:
        raise NotImplementedError("Run the work pending on the queue, then return.")

    def prepare(self, request: pytest.FixtureRequest, settings: Any) -> None:
        """Configure what the backend needs (e.g. ``settings.TASKS``) before each test."""

    @pytest.fixture(autouse=True)
    def queue(self, request: pytest.FixtureRequest, settings: Any) -> Any:
        self.prepare(request, settings)
        config = {"BACKEND": self.backend, "OPTIONS": dict(self.options)}
        configure(
            settings, QUEUES={"default": config}, TASKS_SYNC=False,
            EMBEDDERS={"default": KEYWORD_EMBEDDER},
        )  # fmt: skip
        return queues["default"]

    @pytest.fixture
    def collection(self) -> Any:
        collection, _ = get_or_create_collection("queue-suite")
        texts = {"a": "North is up.", "b": "East is right."}
        ingest(collection, [Source.from_text(t, external_id=k) for k, t in texts.items()])
        return collection

    def test_the_backend_is_installed_and_checks_clean(self, queue) -> None:
        assert queue.installed()
        queue.require()
        assert queue.check() == []
        assert not runs_inline()

    def test_work_is_handed_over_only_when_the_transaction_commits(
        self, collection, django_capture_on_commit_callbacks
    ) -> None:
        with django_capture_on_commit_callbacks(execute=False) as pushes:
            run = enqueue_run("reindex_collection", collection.pk, collection=collection)
        run.refresh_from_db()
        assert run.status == IndexRun.Status.QUEUED and not run.task_id
        assert len(pushes) == 1

    def test_an_index_run_goes_through_the_queue(
        self, request, collection, django_capture_on_commit_callbacks
    ) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            run = enqueue_run("reindex_collection", collection.pk, collection=collection)
        run.refresh_from_db()
        assert run.task_id  # the backend's own id for the work
        self.run_pending(request)
        run.refresh_from_db()
        assert run.status == IndexRun.Status.SUCCEEDED, run.message
        assert run.documents_indexed == 2

    def test_an_evaluation_goes_through_the_queue(
        self, request, collection, django_capture_on_commit_callbacks
    ) -> None:
        eval_set = EvalSet.objects.create(name="gold", collection=collection)
        goldens.judge(eval_set, "north", collection.chunks.get(document__external_id="a"), grade=1)
        with django_capture_on_commit_callbacks(execute=True):
            evaluation = create_eval_run(eval_set, "default", top_k=10)
        self.run_pending(request)
        evaluation.refresh_from_db()
        assert evaluation.status == EvalRun.Status.SUCCEEDED, evaluation.message
        assert evaluation.metrics["ndcg@10"] == 1.0

    def test_scheduling_periodic_work_is_accepted(self, queue) -> None:
        queue.schedule_every("retrieval.tasks.drain_index_outbox", minutes=1, name="suite")
