"""Keep searches as :class:`~retrieval.models.QueryTrace` rows, sampled, and prune old ones.

:func:`record_search` is called once by :func:`retrieval.services.query.search.search`, so
every face (API, search page, admin playground, commands, tools) is traced alike; each
face names itself with :func:`traced_as`, kept as the trace's ``source`` (a direct call
is ``python``), so analytics can leave editors' searches out.
``RETRIEVAL["TRACE_SAMPLE_RATE"]`` is the share kept (0 none, 1 all);
``TRACE_RETENTION_DAYS`` how long :func:`prune_traces` keeps them.
"""

from __future__ import annotations

import contextvars
import logging
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from retrieval.conf import retrieval_settings
from retrieval.models import Collection, QueryTrace
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import current_trace
from retrieval.services.types import RetrievalResult
from retrieval.validation.storable import NUL

logger = logging.getLogger(__name__)

_untraced: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "retrieval_untraced", default=False
)


@contextmanager
def untraced(when: bool = True) -> Iterator[None]:
    """Keep no trace of the searches run inside (evaluation runs, replays), if ``when``."""
    token = _untraced.set(when or _untraced.get())
    try:
        yield
    finally:
        _untraced.reset(token)


_source: contextvars.ContextVar[str] = contextvars.ContextVar(
    "retrieval_trace_source", default=QueryTrace.Source.PYTHON
)


@contextmanager
def traced_as(source: str) -> Iterator[None]:
    """Record the searches run inside as coming from ``source`` (a ``QueryTrace.Source``)."""
    token = _source.set(QueryTrace.Source(source))
    try:
        yield
    finally:
        _source.reset(token)


def current_source() -> str:
    """Return the face the searches run here are recorded as coming from."""
    return _source.get()


def carrying_source(function: Callable[[], Any]) -> Callable[[], Any]:
    """Return ``function`` to run in another thread logged as searches are here (their
    source, untraced or not): a new thread starts with the context variables' defaults."""
    source, skip = _source.get(), _untraced.get()

    def run() -> Any:
        with traced_as(source), untraced(skip):
            return function()

    return run


def sample_rate() -> float:
    """Return ``TRACE_SAMPLE_RATE`` as a number in [0, 1]."""
    try:
        rate = float(retrieval_settings.TRACE_SAMPLE_RATE or 0)
    except (TypeError, ValueError):
        return 0.0
    return min(max(rate, 0.0), 1.0)


def result_record(result: RetrievalResult) -> dict[str, Any]:
    """Return what a trace keeps of one result: ids, score, rank and each leg's."""
    chunk = result.chunk
    metadata = result.metadata
    record: dict[str, Any] = {
        "rank": result.rank + 1,
        "score": result.score,
        "chunk_id": chunk.pk,
        "chunk_index": chunk.index,
        "document": chunk.document.external_id,
        "document_id": chunk.document_id,
        "legs": metadata.get("legs", {}),
    }
    for key in ("original_rank", "original_score", "failed_legs", "promoted", "promotion_id"):
        if key in metadata:
            record[key] = metadata[key]
    if "own_score" in metadata:  # a document's leader lifted by the fusion's document floor
        record["own_score"], record["raw_score"] = metadata["own_score"], metadata["raw_score"]
    return record


def record_search(
    query: str,
    *,
    collection: Collection,
    pipeline: str,
    top_k: int,
    filters: Filters | Any,
    results: Sequence[RetrievalResult],
    trace: dict[str, Any],
    user: Any = None,
) -> QueryTrace | None:
    """Store this search as a trace if sampled; return it (``None`` if not kept).

    A search nested in another one (a tool inside an agent's search) is part of the
    outer trace and is not stored on its own. A trace that cannot be stored (a value
    PostgreSQL refuses) is logged and replaced by a bare one: who searched what and the
    results' ids, with the reason (``trace["unstored"]``), so no search goes unrecorded
    for want of a storable trace. Neither failure fails the search.
    """
    if _untraced.get() or current_trace() is not None:
        return None
    rate = sample_rate()
    if rate <= 0 or (rate < 1 and random.random() >= rate):
        return None
    parsed = filters if isinstance(filters, Filters) else Filters.parse(filters)
    bare = {
        "query": query,
        "user": user if getattr(user, "pk", None) else None,
        "collection": collection,
        "pipeline": pipeline,
        "top_k": top_k,
        "ms": float(trace.get("ms") or 0.0),
        "result_count": len(results),
        "source": _source.get(),
    }
    try:
        with transaction.atomic():
            return QueryTrace.objects.create(
                **bare,
                filters=_filters_dict(parsed),
                llm_tokens=int(trace.get("llm_tokens") or 0),
                results=[result_record(result) for result in results],
                trace=trace,
            )
    except DatabaseError as e:
        logger.exception(
            "Could not store the trace of a search of %s; storing a bare one", collection
        )
        reason = f"{type(e).__name__}: {e}".replace(NUL, "")[:1000]
    try:
        with transaction.atomic():
            return QueryTrace.objects.create(
                **bare | {"query": query.replace(NUL, "\ufffd")},
                results=[
                    {"rank": r.rank + 1, "chunk_id": r.chunk.pk, "document_id": r.chunk.document_id}
                    for r in results
                ],
                trace={"unstored": reason},
            )
    except DatabaseError:
        logger.exception("Could not store even a bare trace of a search of %s", collection)
        return None


def _filters_dict(filters: Filters) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if filters.document_ids is not None:
        data["document_ids"] = list(filters.document_ids)
    if filters.documents is not None:
        data["documents"] = list(filters.documents)
    if filters.metadata:
        data["metadata"] = filters.metadata
    return data


def prune_traces(*, days: float | None = None, batch_size: int = 1000) -> int:
    """Delete traces older than ``days`` (default ``TRACE_RETENTION_DAYS``) in batches.

    Each batch is its own short transaction, so a large backlog never holds long locks.
    Return how many were deleted.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1.")
    days = float(retrieval_settings.TRACE_RETENTION_DAYS if days is None else days)
    if days < 0:
        raise ValueError("days must not be negative.")
    threshold = timezone.now() - timedelta(days=days)
    deleted = 0
    while True:
        ids = list(
            QueryTrace.objects.filter(created_at__lt=threshold)
            .order_by("pk")
            .values_list("pk", flat=True)[:batch_size]
        )
        if not ids:
            return deleted
        count, _ = QueryTrace.objects.filter(pk__in=ids).delete()
        deleted += count
