"""Promoted results (editors' picks): documents pinned to a query or a query pattern.

:func:`promote` runs after a search's pipeline, on every face (the facade, hence the
API, the search page, the playground and evaluation runs; and the ``retrieve`` tool):
the documents of the active promotions whose pattern matches the query come first, in
their promotions' order, then the search's own results. A promoted document is shown
only where the search could have shown it: within the collection, the search's filters
and the access scope they carry (a hidden promoted document is never shown, nor named
in the trace). Each promoted result is the document's best chunk among the results, else
its first chunk that passes the filters; it scores 1.0 (its retrieved score, if it was
found, is kept as ``metadata["retrieved_score"]``, so packing a context takes it first)
and carries ``metadata["promoted"] = True`` and its promotion's id. The trace records a
``promoted`` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.db import connections

from retrieval.models import Chunk, Collection, Promotion
from retrieval.normalizing import matches
from retrieval.querysets import load_chunks
from retrieval.services.core.databases import search_database
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import current_trace
from retrieval.services.types import RetrievalResult

__all__ = ["matching_promotions", "promote"]

#: The score of a promoted result: the most a result can score.
PROMOTED_SCORE = 1.0


def matching_promotions(query: str, collection: Collection, *, using: str | None = None):
    """Return the active promotions of ``collection`` whose pattern matches ``query``,
    in the order their documents are shown (position, then oldest first)."""
    text = query.replace("\x00", "")  # PostgreSQL text holds no NUL; no pattern has one
    return (
        Promotion.objects.using(using or search_database())
        .filter(matches(text), collection=collection, active=True)
        .order_by("position", "pk")
        .values_list("pk", "document_id")
    )


def promote(
    query: str,
    results: Sequence[RetrievalResult],
    *,
    collection: Collection,
    filters: Filters,
    top_k: int,
) -> list[RetrievalResult]:
    """Return ``results`` with the documents promoted for ``query`` first, at most ``top_k``.

    ``filters`` are the search's, with its access scope (``Scope.filters``): a promoted
    document they exclude is left out. Without a matching promotion, ``results`` come
    back as they are.
    """
    db = search_database()
    picks: dict[int, int] = {}  # document id -> promotion id, in the order shown
    for promotion_id, document_id in matching_promotions(query, collection, using=db):
        picks.setdefault(document_id, promotion_id)
    if not picks:
        return list(results)
    best: dict[int, RetrievalResult] = {}
    for result in results:
        best.setdefault(result.chunk.document_id, result)
    missing = [document_id for document_id in picks if document_id not in best]
    first_chunks = _first_chunks(missing, collection=collection, filters=filters, using=db)
    promoted: list[RetrievalResult] = []
    events: list[dict[str, Any]] = []
    for document_id, promotion_id in picks.items():
        found = best.get(document_id)
        chunk = found.chunk if found is not None else first_chunks.get(document_id)
        if chunk is None:  # outside the filters or the scope, or without chunks
            continue
        metadata = {**(found.metadata if found else {}), "promoted": True}
        metadata["promotion_id"] = promotion_id
        if found is not None:
            metadata["retrieved_score"] = found.score
            metadata["retrieved_rank"] = found.rank + 1
        promoted.append(RetrievalResult(chunk, PROMOTED_SCORE, 0, metadata))
        events.append(
            {
                "promotion_id": promotion_id,
                "document_id": document_id,
                "chunk_id": chunk.pk,
                "retrieved_rank": found.rank + 1 if found is not None else None,
            }
        )
    if not promoted:
        return list(results)
    shown = {result.chunk.pk for result in promoted}
    rest = [result for result in results if result.chunk.pk not in shown]
    ranked = [replace(result, rank=rank) for rank, result in enumerate([*promoted, *rest][:top_k])]
    trace = current_trace()
    if trace is not None:
        trace.record("promoted", results=events[:top_k])
    return ranked


def _first_chunks(
    document_ids: list[int], *, collection: Collection, filters: Filters, using: str
) -> dict[int, Any]:
    """Return each document's first chunk that passes ``filters`` (scope included)."""
    if not document_ids:
        return {}
    conditions, params = filters.using(using).sql("c", collection_id=collection.pk)
    where = " AND ".join(["c.collection_id = %s", "c.document_id = ANY(%s)", *conditions])
    sql = (
        f"SELECT DISTINCT ON (c.document_id) c.id FROM {Chunk._meta.db_table} c "
        f"WHERE {where} ORDER BY c.document_id, c.index"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [collection.pk, document_ids, *params])
        ids = [row[0] for row in cursor.fetchall()]
    chunks = load_chunks(ids, using=using)
    return {chunk.document_id: chunk for chunk in chunks.values()}
