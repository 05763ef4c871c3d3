"""Start indexing work from the admin: every screen goes through these two functions.

They enqueue :mod:`retrieval.tasks` (on the queue's workers, or inline when
``TASKS_SYNC`` says so) and return the :class:`IndexRun` of each job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from retrieval.models import Collection, Document, IndexRun
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.tasks import index_documents, reindex_collection


def queue_indexing(documents: Iterable[Document], *, user: Any = None) -> list[IndexRun]:
    """Index ``documents`` again from their stored upload (or text); a run per collection."""
    by_collection: dict[int, list[int]] = {}
    for document in documents:
        by_collection.setdefault(document.collection_id, []).append(document.pk)
    collections = Collection.objects.in_bulk(list(by_collection))
    return [
        enqueue_run(
            index_documents,
            ids,
            force=True,
            collection=collections[collection_id],
            created_by=user,
        )
        for collection_id, ids in by_collection.items()
    ]


def queue_reindex(collection: Collection, *, user: Any = None) -> IndexRun:
    """Index every document of ``collection`` again."""
    return enqueue_run(reindex_collection, collection.pk, collection=collection, created_by=user)


def run_said(run: IndexRun, subject: str = "") -> str:
    """Return the message that tells an editor what became of ``run``: its own message, or
    its state (a queued run has no message yet, and "Index run #5:" ended at the colon).

    ``subject`` names what the run is for ("atlas"); without one the run names itself.
    """
    if run.message:
        return f"{subject or f'Index run #{run.pk}'}: {run.message}"
    state = run.get_status_display().lower()
    waiting = " for a worker" if run.status == IndexRun.Status.QUEUED else ""
    said = f"index run #{run.pk} {state}{waiting}."
    return f"{subject}: {said}" if subject else said[0].upper() + said[1:]
