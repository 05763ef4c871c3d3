"""The outbox: changes to external indexes, recorded with the chunk writes, applied later.

Triggers on ``retrieval_chunk`` (migration 0007) record the inserted and deleted
chunk ids of collections whose index is external (``Collection.external_index``) in
the writing transaction; collection deletes and re-embeddings record a "drop" or a
"rebuild" here. :func:`drain` applies them, oldest first:

- each operation is idempotent: "write" and "delete" both make the engine match
  PostgreSQL *now* for their chunk ids (present with a vector: upsert; gone: delete),
  so replaying one, or applying them out of order, converges;
- workers take a collection's operations under a transaction-scoped advisory lock
  and the rows with ``FOR UPDATE SKIP LOCKED``, so two drains never interleave on one
  collection;
- an operation that fails stays, with its error, and is retried after a backoff
  (``min(2**attempts, 300)`` seconds): an engine that is down loses nothing;
- consecutive "write" and "delete" operations of a batch are applied together (each
  only says "match PostgreSQL for these ids"), then the index confirms that searches
  see them (:meth:`~retrieval.services.indexes.base.BaseIndex.await_visible`) before
  they are deleted: until then searches rank those chunks in PostgreSQL.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Min
from django.utils import timezone

from retrieval.models import Chunk, Collection, IndexOperation
from retrieval.services.queues import enqueue_after_commit, runs_inline, schedule_every
from retrieval.services.registry import indexes

logger = logging.getLogger(__name__)

#: pg_try_advisory_xact_lock namespace (the bytes of "ridx"): one drainer per collection.
LOCK_NAMESPACE = 0x72696478
#: Operations of one collection applied in one transaction.
BATCH = 50
#: Chunk vectors sent to the engine in one call.
WRITE_BATCH = 500
MAX_BACKOFF_SECONDS = 300
#: The task that drains the outbox on the queue's workers.
DRAIN_TASK = "drain_index_outbox"


@dataclass
class DrainResult:
    """What one drain did."""

    applied: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def record_drop(collection_id: int, alias: str, *, using: str = "default") -> None:
    """Record that index ``alias`` must drop a collection's space: the collection is being
    deleted (in the delete's transaction) or has moved to another index."""
    IndexOperation.objects.using(using).create(
        collection_id=collection_id, index=alias, kind=IndexOperation.Kind.DROP
    )
    _schedule_drain(using=using)


def record_rebuild(collection: Collection) -> None:
    """Record that the collection's space must be rebuilt from PostgreSQL's vectors."""
    IndexOperation.objects.create(
        collection_id=collection.pk, index=collection.index, kind=IndexOperation.Kind.REBUILD
    )
    _schedule_drain()


def pending(collection_id: int) -> dict[str, object]:
    """Return the count, oldest age and last error of a collection's pending operations."""
    operations = IndexOperation.objects.filter(collection_id=collection_id)
    failing = operations.exclude(last_error="").order_by("-pk").first()
    return {
        "count": operations.count(),
        "oldest": operations.aggregate(oldest=Min("created_at"))["oldest"],
        "last_error": failing.last_error if failing else "",
    }


def drain(
    *, collection_id: int | None = None, include_waiting: bool = False, wait: bool = False
) -> DrainResult:
    """Apply due operations (of one collection, if given) until none is left or all fail.

    ``include_waiting`` also applies operations still waiting out their backoff
    (a command run by hand); ``wait`` waits for a drain already applying a
    collection's operations (elsewhere) rather than leaving them to it.
    """
    result = DrainResult()
    done: set[int] = set()
    while True:
        ids = _due_collections(collection_id, include_waiting, exclude=done)
        if not ids:
            return result
        for cid in ids:
            if not _drain_collection(cid, include_waiting, result, wait=wait):
                done.add(cid)


def _due_collections(collection_id: int | None, include_waiting: bool, exclude: set[int]):
    operations = IndexOperation.objects.all()
    if collection_id is not None:
        operations = operations.filter(collection_id=collection_id)
    if not include_waiting:
        operations = operations.filter(next_attempt_at__lte=timezone.now())
    # order_by() drops the model's ordering by pk, which DISTINCT would otherwise select
    # too: one row per operation, and a failing collection tried once per operation.
    ids = operations.order_by().values_list("collection_id", flat=True).distinct()
    return [cid for cid in ids if cid not in exclude]


def _drain_collection(
    collection_id: int, include_waiting: bool, result: DrainResult, *, wait: bool = False
) -> bool:
    """Apply one batch of a collection's operations; return whether to come back for more."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            lock = "pg_advisory_xact_lock" if wait else "pg_try_advisory_xact_lock"
            cursor.execute(f"SELECT {lock}(%s, %s)::text", [LOCK_NAMESPACE, collection_id])
            if cursor.fetchone()[0] == "false":
                return False  # another drain has it
        operations = IndexOperation.objects.select_for_update(skip_locked=True).filter(
            collection_id=collection_id
        )
        if not include_waiting:
            operations = operations.filter(next_attempt_at__lte=timezone.now())
        batch = list(operations.order_by("pk")[:BATCH])
        if not batch:
            return False
        applied = 0
        for group in _groups(batch):
            try:
                with transaction.atomic():  # a database error leaves the batch usable
                    _apply(group)
            except Exception as e:  # the engine's reason, kept on the rows and retried
                reason = f"{e.__class__.__name__}: {e}"
                logger.warning("Index operation #%s failed: %s", group[0].pk, reason)
                _reset(group[0].index)
                _forget(batch[:applied], result)
                _postpone(batch[applied:], reason)
                result.failed += len(batch) - applied
                result.errors.append(reason)
                return False
            applied += len(group)
        _forget(batch, result)
    return True


def _groups(batch: list[IndexOperation]) -> list[list[IndexOperation]]:
    """Split a batch, in order, into runs of "write"/"delete" operations of one index
    (applied together) and single "drop"/"rebuild" operations."""
    groups: list[list[IndexOperation]] = []
    for operation in batch:
        mergeable = operation.kind in (IndexOperation.Kind.WRITE, IndexOperation.Kind.DELETE)
        previous = groups[-1][-1] if groups else None
        if (
            mergeable
            and previous is not None
            and previous.kind in (IndexOperation.Kind.WRITE, IndexOperation.Kind.DELETE)
            and previous.index == operation.index
        ):
            groups[-1].append(operation)
        else:
            groups.append([operation])
    return groups


def _forget(operations: list[IndexOperation], result: DrainResult) -> None:
    """Delete applied operations (in the drain's transaction)."""
    if operations:
        IndexOperation.objects.filter(pk__in=[o.pk for o in operations]).delete()
        result.applied += len(operations)


def _reset(alias: str) -> None:
    if alias in indexes:
        indexes[alias].reset()


def _postpone(operations: list[IndexOperation], reason: str) -> None:
    """Keep ``operations`` (the failed one first) for a retry after a backoff."""
    now = timezone.now()
    for operation in operations:
        operation.attempts += 1
        operation.last_error = reason[:2000]
        delay = min(2 ** min(operation.attempts, 16), MAX_BACKOFF_SECONDS)
        operation.next_attempt_at = now + timedelta(seconds=delay)
    IndexOperation.objects.bulk_update(operations, ["attempts", "last_error", "next_attempt_at"])


def _apply(group: list[IndexOperation]) -> None:
    operation = group[0]
    index = indexes[operation.index]
    if operation.kind == IndexOperation.Kind.DROP:
        current = Collection.objects.filter(pk=operation.collection_id).values_list("index")
        if current.first() != (operation.index,):  # deleted, or moved to another index
            index.drop_space(operation.collection_id)
        return
    collection = Collection.objects.filter(pk=operation.collection_id).first()
    if collection is None:
        return  # its "drop" operation empties the space
    if operation.kind == IndexOperation.Kind.REBUILD:
        index.rebuild(collection)
        return
    chunk_ids = sorted({int(i) for member in group for i in member.chunk_ids})
    sync_ids(index, collection, chunk_ids)


def sync_ids(index, collection: Collection, chunk_ids: list[int]) -> None:
    """Make ``index`` match PostgreSQL for ``chunk_ids``: upsert those present, delete the
    rest; return once its searches see that (``await_visible``)."""
    written: list[int] = []
    deleted: list[int] = []
    for start in range(0, len(chunk_ids), WRITE_BATCH):
        part = chunk_ids[start : start + WRITE_BATCH]
        rows = list(
            Chunk.objects.filter(
                collection=collection, pk__in=part, embedding__isnull=False
            ).values_list("pk", "document_id", "metadata", "embedding")
        )
        present = {row[0] for row in rows}
        if rows:
            index.ensure_space(collection)
            index.write(collection, rows)
        gone = [i for i in part if i not in present]
        if gone:
            index.delete(collection, gone)
        written += present
        deleted += gone
    index.await_visible(collection, written=written, deleted=deleted)


def changed(collection: Collection | None = None, *, using: str = "default") -> None:
    """Drain after this transaction if its chunk writes were recorded here: ``collection``
    is on an external index (without one: any collection is, for deletes that may span
    several). The one kick of the paths that write or delete chunks (the triggers record
    what they did); :func:`record_drop` and :func:`record_rebuild` kick for what they
    record, and on workers a schedule also drains every minute (:func:`ensure_schedule`).
    """
    if collection is not None:
        external = collection.external_index
    else:
        external = Collection.objects.using(using).filter(external_index=True).exists()
    if external:
        _schedule_drain(using=using)


def ensure_schedule() -> None:
    """On a queue that runs schedules (django-q2), drain the outbox every minute too."""
    if runs_inline():
        return
    schedule_every(DRAIN_TASK, minutes=1, label="retrieval: drain the index outbox")


def _schedule_drain(*, using: str = "default") -> None:
    """Drain once the current transaction commits: inline, or on the queue's workers."""
    if not runs_inline():
        enqueue_after_commit(DRAIN_TASK, label="retrieval: drain the index outbox", using=using)
        return

    def run() -> None:
        try:
            drain()
        except Exception:  # a drain must never break the write that scheduled it
            logger.exception("Draining the index outbox failed")

    transaction.on_commit(run, using=using)
