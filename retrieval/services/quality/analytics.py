"""Search analytics: what a collection's traces say about its searches over a period.

Everything is computed by PostgreSQL from :class:`~retrieval.models.QueryTrace` rows,
grouped by their ``query_key`` (the query lower-cased, spaces collapsed). The queries
read a collection's traces of a period from the index ``retrieval_trace_report_idx``
(collection, time; query key, result count, milliseconds, source, user and id included),
so they never touch the traces' stored results; searches that found nothing come from a
partial index of their own.

Clicks (:class:`~retrieval.models.SearchClick`) count only on searches that could be
clicked: kept traces of the search page's and the API's searches that found something
(:data:`CLICKABLE`). The click-through rate is the share of those with at least one
click; the mean click position averages every click's position (1 the first document).
Unique searchers are distinct signed-in users; anonymous searches are counted apart,
not as searchers, and a searcher is shown only as :func:`searcher_key`, a keyed hash.

Readers' searches count, editors' (the playground's, evaluations') only when asked
for: testing a pipeline is not traffic. What a user is shown follows the access policy
(:meth:`~retrieval.services.access.Scope.restrict_traces`): the traces of collections
they see, only their own under a document restriction.
Negative feedback comes from the votes of ``POST /api/feedback/`` (judgments of grade
0), which, like golden sets, are closed to users restricted to some documents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import (
    Aggregate,
    Avg,
    Count,
    Exists,
    FloatField,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce, Trunc
from django.utils import timezone
from django.utils.crypto import salted_hmac

from retrieval.models import Collection, Judgment, QueryTrace, SearchClick
from retrieval.services.access import Scope

__all__ = [
    "CLICKABLE",
    "Bucket",
    "Percentile",
    "QueryRow",
    "SearcherRow",
    "SearchReport",
    "period_traces",
    "readers_only",
    "report_period",
    "search_report",
    "searcher_key",
]

#: Rows of each list a report keeps.
DEFAULT_LIMIT = 20
#: Periods of at most this long are charted by the hour, longer ones by the day.
HOURLY_UP_TO = timedelta(days=2)
#: The sources of editors' searches, left out of the figures unless asked for.
EDITORS = (QueryTrace.Source.PLAYGROUND, QueryTrace.Source.EVALUATION)
#: The sources whose searches hand their reader a click token (the search page, the API).
CLICK_SOURCES = (QueryTrace.Source.PAGE, QueryTrace.Source.API)
#: The searches that could be clicked: a reader's face, and something found.
CLICKABLE = Q(source__in=CLICK_SOURCES, result_count__gt=0)
#: A search with at least one click.
CLICKED = Q(Exists(SearchClick.objects.filter(trace=OuterRef("pk"))))


class Percentile(Aggregate):
    """``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``: a continuous
    percentile (0.5 the median), as PostgreSQL computes it."""

    function = "percentile_cont"
    name = "Percentile"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, fraction: float, **extra: Any) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must lie in [0, 1], not {fraction!r}.")
        super().__init__(expression, fraction=float(fraction), **extra)


@dataclass(frozen=True)
class QueryRow:
    """One query (by its key) over the period."""

    query: str
    searches: int
    empty: int = 0
    avg_ms: float | None = None
    max_ms: float | None = None
    last_seen: datetime | None = None
    clickable: int = 0  # searches that could be clicked (CLICKABLE)
    clicked: int = 0  # of those, searches with at least one click
    clicks: int = 0
    positions: int = 0  # the clicks' positions added up
    searchers: int = 0  # distinct signed-in users

    @property
    def empty_rate(self) -> float:
        return self.empty / self.searches if self.searches else 0.0

    @property
    def ctr(self) -> float | None:
        """Return the click-through rate, ``None`` when no search could be clicked."""
        return self.clicked / self.clickable if self.clickable else None

    @property
    def mean_position(self) -> float | None:
        """Return the mean position of the clicks, ``None`` without clicks."""
        return self.positions / self.clicks if self.clicks else None


@dataclass(frozen=True)
class SearcherRow:
    """A signed-in searcher, known only by :func:`searcher_key`."""

    key: str
    searches: int
    last_seen: datetime | None = None


@dataclass(frozen=True)
class Bucket:
    """An hour or a day of the period: searches, those with no result, latency."""

    start: datetime
    searches: int = 0
    empty: int = 0
    p50: float | None = None
    p95: float | None = None


@dataclass(frozen=True)
class SearchReport:
    """A collection's searches over ``[since, until)``, as one user may see them."""

    collection: Collection
    since: datetime
    until: datetime
    step: str  # "hour" or "day": the charts' buckets
    searches: int
    empty: int
    p50: float | None
    p95: float | None
    top: list[QueryRow] = field(default_factory=list)
    no_results: list[QueryRow] = field(default_factory=list)
    slowest: list[QueryRow] = field(default_factory=list)
    #: ``None`` when feedback is closed to the user (a document restriction).
    negative_feedback: list[QueryRow] | None = None
    series: list[Bucket] = field(default_factory=list)
    only_own: bool = False  # the user sees only their own traces
    editors: bool = False  # editors' searches are counted
    clicks: QueryRow = field(default_factory=lambda: QueryRow(query=""))  # the totals
    no_clicks: list[QueryRow] = field(default_factory=list)
    searchers: int = 0  # distinct signed-in users
    anonymous: int = 0  # searches of no signed-in user
    top_searchers: list[SearcherRow] = field(default_factory=list)

    @property
    def empty_rate(self) -> float:
        return self.empty / self.searches if self.searches else 0.0


def period_traces(
    collection: Collection,
    *,
    scope: Scope,
    since: datetime,
    until: datetime,
    editors: bool = False,
) -> QuerySet:
    """Return the traces of ``collection`` in ``[since, until)`` that ``scope`` may see,
    editors' searches only if ``editors``."""
    traces = QueryTrace.objects.filter(
        collection=collection, created_at__gte=since, created_at__lt=until
    )
    if not editors:
        traces = readers_only(traces)
    return scope.restrict_traces(traces).order_by()


def readers_only(traces: QuerySet) -> QuerySet:
    """Leave out editors' searches: ``source`` is in the trace indexes, so this is read
    from them too (an index-only scan still)."""
    return traces.exclude(source__in=EDITORS)


def search_report(
    collection: Collection | str,
    *,
    scope: Scope,
    since: datetime,
    until: datetime | None = None,
    limit: int = DEFAULT_LIMIT,
    editors: bool = False,
) -> SearchReport:
    """Return what the traces of ``collection`` in ``[since, until)`` say.

    :param scope: whose report: only the traces it may see count; a hidden collection
        raises :class:`~retrieval.exceptions.CollectionNotFound` like a missing one.
    :param until: the end of the period (default now).
    :param limit: rows of each list (top, no results, slowest, negative feedback).
    :param editors: count editors' searches (the playground's, evaluations') too.
    """
    target, until = report_period(collection, scope=scope, since=since, until=until)
    traces = period_traces(target, scope=scope, since=since, until=until, editors=editors)
    totals = traces.aggregate(
        searches=Count("*"),
        empty=Count("created_at", filter=Q(result_count=0)),
        p50=Percentile("ms", 0.5),
        p95=Percentile("ms", 0.95),
        searchers=Count("user", distinct=True),
        anonymous=Count("created_at", filter=Q(user__isnull=True)),
        **click_figures(),
    )
    step = "hour" if until - since <= HOURLY_UP_TO else "day"
    return SearchReport(
        collection=target,
        since=since,
        until=until,
        step=step,
        searches=totals["searches"],
        empty=totals["empty"],
        p50=totals["p50"],
        p95=totals["p95"],
        top=top_queries(traces, limit),
        no_results=queries_without_results(traces, limit),
        slowest=slowest_queries(traces, limit),
        negative_feedback=(
            negative_feedback(target, since=since, until=until, limit=limit)
            if scope.sees_quality
            else None
        ),
        series=series(traces, since=since, until=until, step=step),
        only_own=not scope.sees_quality,
        editors=editors,
        clicks=_row({**totals, "query_key": ""}),
        no_clicks=queries_without_clicks(traces, limit),
        searchers=totals["searchers"],
        anonymous=totals["anonymous"],
        top_searchers=top_searchers(traces, limit),
    )


def report_period(
    collection: Collection | str, *, scope: Scope, since: datetime, until: datetime | None
) -> tuple[Collection, datetime]:
    """Return the collection a report is of (as ``scope`` sees it) and its period's end
    (default now); raise ``ValueError`` for a period that ends before it starts."""
    target = scope.collection(collection)
    until = until or timezone.now()
    if since >= until:
        raise ValueError("since must come before until.")
    return target, until


def click_figures() -> dict[str, Aggregate]:
    """Return the aggregates of the clicks on a set of traces: searches that could be
    clicked, those clicked, their clicks and the clicks' positions added up."""
    per_trace = SearchClick.objects.filter(trace=OuterRef("pk")).order_by().values("trace")
    count = per_trace.annotate(n=Count("*")).values("n")
    positions = per_trace.annotate(n=Sum("position")).values("n")
    return {
        "clickable": Count("created_at", filter=CLICKABLE),
        "clicked": Count("created_at", filter=CLICKABLE & CLICKED),
        "clicks": Coalesce(Sum(Subquery(count, output_field=IntegerField()), filter=CLICKABLE), 0),
        "positions": Coalesce(
            Sum(Subquery(positions, output_field=IntegerField()), filter=CLICKABLE), 0
        ),
    }


def searcher_key(user_id: Any) -> str:
    """Return how a searcher is shown: a hash of their id keyed with ``SECRET_KEY``,
    the same on every report of a site, that nobody without the key can reverse."""
    return salted_hmac("retrieval.searcher", str(user_id), algorithm="sha256").hexdigest()[:12]


def top_queries(traces: QuerySet, limit: int) -> list[QueryRow]:
    """Return the most searched queries, with their share of empty answers and speed."""
    rows = (
        traces.values("query_key")
        .annotate(
            searches=Count("*"),
            empty=Count("created_at", filter=Q(result_count=0)),
            avg_ms=Avg("ms"),
            max_ms=Max("ms"),
            last_seen=Max("created_at"),
            searchers=Count("user", distinct=True),
            **click_figures(),
        )
        .order_by("-searches", "query_key")[:limit]
    )
    return [_row(row) for row in rows]


def queries_without_clicks(traces: QuerySet, limit: int) -> list[QueryRow]:
    """Return the queries whose searches most often found something nobody clicked."""
    rows = (
        traces.filter(CLICKABLE)
        .exclude(CLICKED)
        .values("query_key")
        .annotate(searches=Count("*"), last_seen=Max("created_at"))
        .order_by("-searches", "query_key")[:limit]
    )
    return [_row(row) for row in rows]


def top_searchers(traces: QuerySet, limit: int) -> list[SearcherRow]:
    """Return the signed-in users who searched most, each as :func:`searcher_key`."""
    rows = (
        traces.filter(user__isnull=False)
        .values("user")
        .annotate(searches=Count("*"), last_seen=Max("created_at"))
        .order_by("-searches", "user")[:limit]
    )
    return [SearcherRow(searcher_key(r["user"]), r["searches"], r["last_seen"]) for r in rows]


def queries_without_results(traces: QuerySet, limit: int) -> list[QueryRow]:
    """Return the queries searched most often that found nothing."""
    rows = (
        traces.filter(result_count=0)
        .values("query_key")
        .annotate(searches=Count("*"), last_seen=Max("created_at"))
        .order_by("-searches", "query_key")[:limit]
    )
    return [_row({**row, "empty": row["searches"]}) for row in rows]


def slowest_queries(traces: QuerySet, limit: int) -> list[QueryRow]:
    """Return the queries whose slowest search took longest."""
    rows = (
        traces.values("query_key")
        .annotate(
            searches=Count("*"),
            avg_ms=Avg("ms"),
            max_ms=Max("ms"),
            last_seen=Max("created_at"),
        )
        .order_by("-max_ms", "query_key")[:limit]
    )
    return [_row(row) for row in rows]


def negative_feedback(
    collection: Collection, *, since: datetime, until: datetime, limit: int
) -> list[QueryRow]:
    """Return the queries whose results readers voted not relevant (not yet rejected)."""
    rows = (
        Judgment.objects.filter(
            query__eval_set__collection=collection,
            source="feedback",
            grade=0,
            created_at__gte=since,
            created_at__lt=until,
        )
        .exclude(status=Judgment.Status.REJECTED)
        .values("query__text")
        .annotate(searches=Count("*"), last_seen=Max("created_at"))
        .order_by("-searches", "query__text")[:limit]
    )
    return [
        QueryRow(query=row["query__text"], searches=row["searches"], last_seen=row["last_seen"])
        for row in rows
    ]


def series(traces: QuerySet, *, since: datetime, until: datetime, step: str) -> list[Bucket]:
    """Return each hour (or day) of the period, empty ones included, oldest first."""
    rows = (
        traces.annotate(bucket=Trunc("created_at", step))
        .values("bucket")
        .annotate(
            searches=Count("*"),
            empty=Count("created_at", filter=Q(result_count=0)),
            p50=Percentile("ms", 0.5),
            p95=Percentile("ms", 0.95),
        )
        .order_by("bucket")
    )
    found = {row["bucket"]: row for row in rows}
    buckets = []
    for start in bucket_starts(since, until, step):
        row = found.get(start)
        if row is None:
            buckets.append(Bucket(start))
        else:
            buckets.append(Bucket(start, row["searches"], row["empty"], row["p50"], row["p95"]))
    return buckets


def bucket_starts(since: datetime, until: datetime, step: str) -> list[datetime]:
    """Return the starts of the hours (or days, in the current time zone) that
    ``[since, until)`` touches."""
    start = _local(since).replace(minute=0, second=0, microsecond=0)
    if step == "day":
        start = start.replace(hour=0)
    starts = []
    while start < until:
        starts.append(start)
        if step == "day":
            start = start + timedelta(days=1)  # wall-clock days: the next local midnight
        elif timezone.is_aware(start):  # absolute hours: a change of clocks skips none
            start = _local(start.astimezone(UTC) + timedelta(hours=1))
        else:
            start = start + timedelta(hours=1)
    return starts


def _local(moment: datetime) -> datetime:
    return timezone.localtime(moment) if timezone.is_aware(moment) else moment


def _row(row: dict[str, Any]) -> QueryRow:
    return QueryRow(
        query=row["query_key"],
        searches=row["searches"],
        empty=row.get("empty", 0),
        avg_ms=row.get("avg_ms"),
        max_ms=row.get("max_ms"),
        last_seen=row.get("last_seen"),
        clickable=row.get("clickable", 0),
        clicked=row.get("clicked", 0),
        clicks=row.get("clicks", 0),
        positions=row.get("positions", 0),
        searchers=row.get("searchers", 0),
    )
