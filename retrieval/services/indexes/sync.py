"""Compare and repair an index against PostgreSQL, the source of truth."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import connection, transaction

from retrieval.models import Chunk, Collection, IndexOperation
from retrieval.services.indexes import index_for, outbox


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
    meanwhile; operations recorded before the rebuild started are then moot.
    """
    index = index_for(collection)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)", [outbox.LOCK_NAMESPACE, collection.pk]
            )
        started = IndexOperation.objects.filter(collection_id=collection.pk).order_by("-pk")
        last = started.values_list("pk", flat=True).first()
        index.rebuild(collection)
        if last is not None and not index.features.transactional:
            IndexOperation.objects.filter(
                collection_id=collection.pk, pk__lte=last, kind__in=["write", "delete", "rebuild"]
            ).delete()
