"""Compare and repair an index against PostgreSQL, the source of truth."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection, transaction

from retrieval.models import Chunk, Collection, IndexOperation
from retrieval.services.indexes import index_for, outbox
from retrieval.services.indexes.pgvector import PgvectorIndex
from retrieval.services.registry import indexes


@dataclass
class Drift:
    """How a collection's index differs from PostgreSQL's chunk vectors."""

    expected: int
    held: int
    missing: set[int] = field(default_factory=set)  # in PostgreSQL, not in the index
    extra: set[int] = field(default_factory=set)  # in the index, not in PostgreSQL
    pending: int = 0  # outbox operations not applied yet

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra)

    def describe(self) -> str:
        return (
            f"PostgreSQL holds {self.expected} chunk vectors, the index {self.held}: "
            f"{len(self.missing)} missing from the index, {len(self.extra)} extra; "
            f"{self.pending} outbox operations pending."
        )


def compare(collection: Collection) -> Drift:
    """Compare the chunk ids with a vector in PostgreSQL with those the index holds."""
    expected = set(
        Chunk.objects.filter(collection=collection, embedding__isnull=False).values_list(
            "pk", flat=True
        )
    )
    held = index_for(collection).ids(collection)
    return Drift(
        expected=len(expected),
        held=len(held),
        missing=expected - held,
        extra=held - expected,
        pending=IndexOperation.objects.filter(collection_id=collection.pk).count(),
    )


def rebuild(collection: Collection) -> None:
    """Build the collection's space anew from PostgreSQL and switch to it.

    Holds the outbox's lock on the collection, so no drain writes to the old space
    meanwhile; operations recorded before the rebuild started are then moot. A
    transactional index has no outbox: it is rebuilt outside a transaction (pgvector:
    CONCURRENTLY, writes going on meanwhile) unless the caller is in one.
    """
    index = index_for(collection)
    if index.features.transactional:
        index.rebuild(collection)
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", [outbox.LOCK_NAMESPACE, collection.pk]
            )
        started = IndexOperation.objects.filter(collection_id=collection.pk).order_by("-pk")
        last = started.values_list("pk", flat=True).first()
        index.rebuild(collection)
        if last is not None:
            IndexOperation.objects.filter(
                collection_id=collection.pk, pk__lte=last, kind__in=["write", "delete", "rebuild"]
            ).delete()


def move(collection: Collection, alias: str) -> None:
    """Move a collection's vectors to index ``alias``: no chunk is embedded again.

    In one transaction (the collection row locked, so no write interleaves) the
    collection names its new index and, for an external one, the outbox records a
    rebuild, which fills a new space from PostgreSQL's vectors; until it lands,
    searches rank in PostgreSQL (through pgvector's index, still there) and writes
    wait in the outbox behind it. Then the rebuild runs here; once it has, what the
    left index held is dropped (pgvector's HNSW index; PostgreSQL keeps every vector).
    A rebuild that fails stays queued and raises: calling this again finishes the move.
    A move to pgvector builds its HNSW index once the switch has committed (concurrently,
    writes going on); searches scan the collection exactly until it is built.
    """
    target = indexes[alias]  # InvalidComponentError naming the configured ones
    leaving = index_for(collection)
    external = not target.features.transactional
    moved = (collection.index or "default") != alias
    if moved:
        with transaction.atomic():
            Collection.objects.select_for_update().filter(pk=collection.pk).first()
            Collection.objects.filter(pk=collection.pk).update(
                index=alias, external_index=external, index_space=""
            )
            collection.index, collection.external_index = alias, external
            collection.index_space = ""
            if external:
                IndexOperation.objects.create(
                    collection_id=collection.pk, index=alias, kind=IndexOperation.Kind.REBUILD
                )
    if moved and not external:
        target.ensure_space(collection)  # after the commit: CONCURRENTLY, unless in a transaction
    if external:
        outbox.drain(collection_id=collection.pk, include_waiting=True, wait=True)
        rebuilding = IndexOperation.objects.filter(
            collection_id=collection.pk, kind=IndexOperation.Kind.REBUILD
        )
        if rebuilding.exists():
            raise RuntimeError(
                f"Collection {collection.name!r} now uses index {alias!r}, but its rebuild "
                f"there has not run: {outbox.pending(collection.pk)['last_error']}"
            )
        collection.refresh_from_db(fields=["index_space"])
    if moved and not leaving.features.transactional:
        outbox.record_drop(collection.pk, leaving.alias)
    elif external:
        PgvectorIndex().drop_space(collection.pk)  # its HNSW index, if it came from pgvector
