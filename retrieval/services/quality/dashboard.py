"""The figures of the admin's landing page, per collection, as one user may see them.

Is everything indexed and in sync (documents, failed ones, chunks, the index backend's
pending operations and last error, the last index run)? Which searches find nothing,
how fast are they (readers' traces of the last 24 hours and 7 days)? Is search getting worse
(the latest evaluation's nDCG@10 and the runs before it)? Which documents are
promoted? Each part follows the access
policy: counts of what the user may read, their own traces and runs only under a
document restriction, no evaluation figures then (golden sets are closed to them).
A handful of grouped statements answer every collection of a page at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Min, Q
from django.utils import timezone

from retrieval.exceptions import RetrievalError
from retrieval.models import (
    Chunk,
    Collection,
    Document,
    EvalRun,
    IndexOperation,
    IndexRun,
    Promotion,
    QueryTrace,
)
from retrieval.services.access import Scope
from retrieval.services.indexes import outbox
from retrieval.services.quality.analytics import CLICKABLE, CLICKED, Percentile, readers_only
from retrieval.services.registry import indexes

__all__ = [
    "PARTS",
    "CollectionFigures",
    "EvalFigures",
    "IndexState",
    "SearchFigures",
    "collection_figures",
]

#: What a caller may ask for (an admin leaves out what the user has no permission to view).
PARTS = frozenset({"documents", "index", "runs", "searches", "evaluations", "promotions"})
#: Earlier runs of the latest evaluation's set and pipeline drawn as its trend.
HISTORY = 10


@dataclass(frozen=True)
class IndexState:
    """Where a collection's vectors are ranked and what its outbox still holds."""

    alias: str
    backend: str = ""
    transactional: bool = True
    space: str = ""
    pending: int = 0
    oldest: datetime | None = None
    last_error: str = ""
    problem: str = ""  # the index is not configured, or cannot be loaded


@dataclass(frozen=True)
class SearchFigures:
    """Searches of the last 24 hours and 7 days; the rest over the 7 days."""

    day: int = 0
    week: int = 0
    empty: int = 0
    p50: float | None = None
    p95: float | None = None
    clickable: int = 0  # searches that could be clicked (analytics.CLICKABLE)
    clicked: int = 0  # of those, searches with at least one click

    @property
    def empty_rate(self) -> float | None:
        return self.empty / self.week if self.week else None

    @property
    def ctr(self) -> float | None:
        """Return the click-through rate of the 7 days, ``None`` if nothing could be clicked."""
        return self.clicked / self.clickable if self.clickable else None


@dataclass(frozen=True)
class EvalFigures:
    """The latest finished evaluation and the runs of its set and pipeline before it."""

    run: EvalRun
    ndcg: float | None
    history: tuple[float, ...] = ()  # nDCG@10, oldest first, the latest last

    @property
    def previous(self) -> float | None:
        return self.history[-2] if len(self.history) > 1 else None

    @property
    def delta(self) -> float | None:
        if self.ndcg is None or self.previous is None:
            return None
        return self.ndcg - self.previous


@dataclass(frozen=True)
class CollectionFigures:
    """One collection's figures; ``None`` where the part was not asked for or the
    user may not see it (evaluations under a document restriction)."""

    collection: Collection
    documents: int | None = None
    failed: int | None = None
    chunks: int | None = None
    index: IndexState | None = None
    last_run: IndexRun | None = None
    searches: SearchFigures | None = None
    evaluation: EvalFigures | None = None
    promotions: int | None = None  # active promotions of documents the user may read
    parts: frozenset[str] = field(default_factory=frozenset)


def collection_figures(
    *,
    scope: Scope,
    collections: Iterable[Collection] | None = None,
    parts: Iterable[str] = PARTS,
    now: datetime | None = None,
) -> list[CollectionFigures]:
    """Return the figures of ``collections`` (default: all ``scope`` sees), in their order.

    :param scope: whose figures; collections it does not see are left out.
    :param parts: which of :data:`PARTS` to compute.
    :param now: the end of the search periods (default now).
    """
    asked = frozenset(parts)
    if asked - PARTS:
        raise ValueError(f"Unknown parts {sorted(asked - PARTS)}; choose among {sorted(PARTS)}.")
    visible = scope.visible_collections()
    if collections is not None:
        wanted = [c.pk for c in collections]
        shown = {c.pk: c for c in visible.filter(pk__in=wanted)}
        targets = [shown[pk] for pk in wanted if pk in shown]
    else:
        targets = list(visible)
    ids = [c.pk for c in targets]
    now = now or timezone.now()
    documents = _documents(ids, scope) if "documents" in asked else {}
    chunks = _chunks(ids, scope) if "documents" in asked else {}
    runs = _last_runs(ids, scope) if "runs" in asked else {}
    searches = _searches(ids, scope, now) if "searches" in asked else {}
    evaluations = _evaluations(ids, scope) if "evaluations" in asked else {}
    promotions = _promotions(ids, scope) if "promotions" in asked else {}
    pending = outbox_states(ids) if "index" in asked else {}
    figures = []
    for collection in targets:
        counted = documents.get(collection.pk, {})
        figures.append(
            CollectionFigures(
                collection=collection,
                documents=counted.get("total", 0) if "documents" in asked else None,
                failed=counted.get("failed", 0) if "documents" in asked else None,
                chunks=chunks.get(collection.pk, 0) if "documents" in asked else None,
                index=index_state(collection, pending[collection.pk]) if "index" in asked else None,
                last_run=runs.get(collection.pk),
                searches=(
                    searches.get(collection.pk, SearchFigures()) if "searches" in asked else None
                ),
                evaluation=evaluations.get(collection.pk),
                promotions=promotions.get(collection.pk, 0) if "promotions" in asked else None,
                parts=asked,
            )
        )
    return figures


def index_state(collection: Collection, pending: dict[str, Any] | None = None) -> IndexState:
    """Return the collection's index backend and the state of its outbox (``pending``:
    :func:`outbox_states`' entry, else read for this collection alone)."""
    state = pending if pending is not None else outbox.pending(collection.pk)
    common = {
        "alias": collection.index,
        "space": collection.index_space,
        "pending": int(state["count"] or 0),
        "oldest": state["oldest"],
        "last_error": str(state["last_error"] or ""),
    }
    if collection.index not in indexes:
        return IndexState(**common, problem=f"Index {collection.index!r} is not configured.")
    try:
        index = indexes[collection.index]
    except RetrievalError as e:
        return IndexState(**common, problem=str(e))
    return IndexState(
        **common, backend=type(index).__name__, transactional=index.features.transactional
    )


def outbox_states(ids: list[int]) -> dict[int, dict[str, Any]]:
    """Return :func:`~retrieval.services.indexes.outbox.pending` of many collections in two
    statements: their pending operations' count, oldest time and latest error."""
    states: dict[int, dict[str, Any]] = {
        pk: {"count": 0, "oldest": None, "last_error": ""} for pk in ids
    }
    operations = IndexOperation.objects.filter(collection_id__in=ids).order_by()
    for row in operations.values("collection_id").annotate(
        count=Count("*"), oldest=Min("created_at")
    ):
        states[row["collection_id"]].update(count=row["count"], oldest=row["oldest"])
    failing = (
        operations.exclude(last_error="")
        .order_by("collection_id", "-pk")
        .distinct("collection_id")
        .values_list("collection_id", "last_error")
    )
    for pk, error in failing:
        states[pk]["last_error"] = error
    return states


def _documents(ids: list[int], scope: Scope) -> dict[int, dict[str, int]]:
    rows = (
        scope.restrict(Document.objects.filter(collection__in=ids), document="pk")
        .order_by()
        .values("collection_id")
        .annotate(total=Count("*"), failed=Count("pk", filter=Q(status=Document.Status.FAILED)))
    )
    return {row["collection_id"]: row for row in rows}


def _chunks(ids: list[int], scope: Scope) -> dict[int, int]:
    rows = (
        scope.restrict(Chunk.objects.filter(collection__in=ids), document="document")
        .order_by()
        .values("collection_id")
        .annotate(total=Count("*"))
    )
    return {row["collection_id"]: row["total"] for row in rows}


def _promotions(ids: list[int], scope: Scope) -> dict[int, int]:
    promotions = Promotion.objects.filter(collection__in=ids, active=True)
    rows = (
        scope.restrict(promotions, document="document")
        .order_by()
        .values("collection_id")
        .annotate(total=Count("*"))
    )
    return {row["collection_id"]: row["total"] for row in rows}


def _last_runs(ids: list[int], scope: Scope) -> dict[int, IndexRun]:
    runs = (
        scope.restrict_runs(IndexRun.objects.filter(collection__in=ids))
        .order_by("collection_id", "-created_at", "-pk")
        .distinct("collection_id")
    )
    return {run.collection_id: run for run in runs}


def _searches(ids: list[int], scope: Scope, now: datetime) -> dict[int, SearchFigures]:
    week, day = now - timedelta(days=7), now - timedelta(days=1)
    traces = QueryTrace.objects.filter(collection__in=ids, created_at__gte=week, created_at__lt=now)
    rows = (
        scope.restrict_traces(readers_only(traces))
        .order_by()
        .values("collection_id")
        .annotate(
            day=Count("created_at", filter=Q(created_at__gte=day)),
            week=Count("*"),
            empty=Count("created_at", filter=Q(result_count=0)),
            p50=Percentile("ms", 0.5),
            p95=Percentile("ms", 0.95),
            clickable=Count("created_at", filter=CLICKABLE),
            clicked=Count("created_at", filter=CLICKABLE & CLICKED),
        )
    )
    return {row.pop("collection_id"): SearchFigures(**row) for row in rows}


def _evaluations(ids: list[int], scope: Scope) -> dict[int, EvalFigures]:
    if not scope.sees_quality:
        return {}
    finished = scope.restrict(
        EvalRun.objects.filter(status=EvalRun.Status.SUCCEEDED), collection="eval_set__collection"
    )
    latest = (
        finished.filter(eval_set__collection__in=ids)
        .select_related("eval_set")
        .order_by("eval_set__collection_id", "-created_at", "-pk")
        .distinct("eval_set__collection_id")
    )
    figures = {}
    for run in latest:
        earlier = (
            finished.filter(
                eval_set=run.eval_set_id, pipeline=run.pipeline, created_at__lte=run.created_at
            )
            .order_by("-created_at", "-pk")
            .values_list("metrics", flat=True)[:HISTORY]
        )
        history = [m.get("ndcg@10") for m in reversed(earlier)]
        figures[run.eval_set.collection_id] = EvalFigures(
            run=run,
            ndcg=run.metrics.get("ndcg@10"),
            history=tuple(value for value in history if value is not None),
        )
    return figures
