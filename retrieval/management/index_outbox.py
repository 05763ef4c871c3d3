"""What a command that wrote chunks does before it exits: apply the external index's outbox.

On a queue, the drain a write schedules waits for a worker; a command run by hand
(``retrieval_ingest`` with no worker running) would leave the engine behind with
nothing said. Searches would still find the new chunks (ranked in PostgreSQL until
the engine has them), but the command applies the operations itself, and says how
many wait, for which index and why, when it cannot.
"""

from __future__ import annotations

from typing import Any

from retrieval.models import Collection
from retrieval.services.indexes import index_for, outbox


def apply_index_outbox(command: Any, collection: Collection, *, out: Any = None) -> None:
    """Apply ``collection``'s pending index operations now; report what is left.

    ``out``: where to say how many were applied (the command's stdout by default; a
    command printing JSON there passes its stderr).
    """
    collection.refresh_from_db(fields=["external_index", "index"])
    if not collection.external_index:
        return  # pgvector: the vectors committed with the chunks
    index = index_for(collection)
    label = f"index {index.alias!r} ({type(index).__name__})"
    try:
        result = outbox.drain(collection_id=collection.pk, include_waiting=True, wait=True)
    except Exception as e:  # the database's own errors: say them, the work is done
        result = outbox.DrainResult(failed=1, errors=[f"{e.__class__.__name__}: {e}"])
    if result.applied:
        (out or command.stdout).write(f"Applied {operations(result.applied)} to {label}.")
    left = outbox.pending(collection.pk)
    if left["count"]:
        reason = left["last_error"] or (result.errors[-1] if result.errors else "not applied yet")
        command.stderr.write(
            f"Not applied to {label} yet: {operations(left['count'])} ({reason}). Searches "
            "rank those chunks in PostgreSQL meanwhile; the queue's workers retry them, or run "
            f"`manage.py retrieval_sync_index --collection {collection.name!r}`."
        )


def operations(count: int) -> str:
    return f"{count} index operation{'s' * (count != 1)}"
