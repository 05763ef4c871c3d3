"""Query traces: filter slow or empty searches; a trace's page explains its ranking;
search analytics over them (:mod:`retrieval.admin.analytics`).

The page lists the results and the candidates that were not returned, with each leg's
rank and score side by side, so "why is this chunk here, why is that one not" reads
off one table. "Replay" opens the playground with the query against another pipeline.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date
from django.utils.html import format_html_join

from retrieval.conf import retrieval_settings
from retrieval.models import Chunk, QueryTrace, SearchClick
from retrieval.services.quality.analytics import readers_only

from .analytics import PERIODS, READERS, day_range, period_label, search_analytics_view
from .base import COLLECTION_FILTER, ReadOnlyAdmin, ScopedAdminMixin, pretty_json, scope_of
from .goldens import MEDIA
from .playground import PIPELINE_PREFIX, searcher_choices

#: Candidates that were not returned, shown on a trace's page.
MAX_MISSED = 30


class SlowFilter(admin.SimpleListFilter):
    title = "speed"
    parameter_name = "slow"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", f"slow (≥ {retrieval_settings.TRACE_SLOW_MS} ms)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(ms__gte=float(retrieval_settings.TRACE_SLOW_MS))
        return queryset


class PeriodFilter(admin.SimpleListFilter):
    """Traces of the last 24 hours, 7, 30 or 90 days (the dashboard's figures link here)."""

    title = "period"
    parameter_name = "period"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, period_label(days)) for value, days in PERIODS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        days = PERIODS.get(self.value() or "")
        if days is None:
            return queryset
        return queryset.filter(created_at__gte=timezone.now() - timedelta(days=days))


class DayRangeFilter(admin.ListFilter):
    """The traces of the days ``from`` … ``to`` (both included), as search analytics
    count them: what a row of a custom range's report leads to. In the sidebar only
    when chosen."""

    title = "days"
    parameters = ("from", "to")

    def __init__(self, request: HttpRequest, params: dict, model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.range = None
        given = {name: params.pop(name, None) for name in self.parameters}
        # Django 5+ hands each parameter as a list of its values.
        raw = {
            name: value[-1] if isinstance(value, list) else value for name, value in given.items()
        }
        if not any(raw.values()):
            return
        try:
            days = {name: parse_date(value) if value else None for name, value in raw.items()}
            if any(raw[name] and days[name] is None for name in self.parameters):
                raise ValidationError("Dates are YYYY-MM-DD.")
            self.range = day_range(days["from"], days["to"])
            self.days = (days["from"], days["to"] or timezone.localdate())
        except (ValidationError, ValueError) as e:
            raise IncorrectLookupParameters(e) from e

    def has_output(self) -> bool:
        return self.range is not None  # shown, and applied, only when chosen

    def expected_parameters(self) -> list[str]:
        return list(self.parameters)

    def choices(self, changelist: Any) -> list[dict[str, Any]]:
        first, last = self.days
        return [
            {
                "selected": False,
                "query_string": changelist.get_query_string(remove=self.parameters),
                "display": "All",
            },
            {
                "selected": True,
                "query_string": changelist.get_query_string(),
                "display": f"{first} to {last}",
            },
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.range is None:
            return queryset
        since, until = self.range
        return queryset.filter(created_at__gte=since, created_at__lt=until)


class EmptyFilter(admin.SimpleListFilter):
    title = "results"
    parameter_name = "empty"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "no results"), ("no", "some results")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(result_count=0)
        if self.value() == "no":
            return queryset.filter(result_count__gt=0)
        return queryset


class SourceFilter(admin.SimpleListFilter):
    """The face a search came from, or readers' searches: all but editors' (the
    dashboard's and analytics' figures link here with ``readers``)."""

    title = "source"
    parameter_name = "source"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(READERS, "readers' searches"), *QueryTrace.Source.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == READERS:
            return readers_only(queryset)
        if self.value() in QueryTrace.Source.values:
            return queryset.filter(source=self.value())
        return queryset


class QueryKeyFilter(admin.SimpleListFilter):
    """One query by its analytics key (normal form), exactly: what a row of the search
    analytics leads to. The search box matches substrings, so "north" would also list
    "north pole". Not shown in the sidebar; the chosen key shows as the page's filter."""

    title = "query"
    parameter_name = "query_key"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(query_key=value) if value is not None else queryset


def _clicked_title(click: SearchClick) -> str:
    document = click.document
    return "(deleted document)" if document is None else (document.title or document.external_id)


def searcher_of(pipeline: str) -> str:
    """Return the playground's name for a trace's pipeline (``retriever:x`` -> ``x``)."""
    if pipeline.startswith("retriever:"):
        return pipeline.removeprefix("retriever:")
    return f"{PIPELINE_PREFIX}{pipeline}"


def explain(trace: QueryTrace) -> dict[str, Any]:
    """Return the results and the missed candidates with every leg's rank and score."""
    events = trace.trace.get("events", [])
    pipeline = next((e for e in reversed(events) if e.get("stage") == "pipeline"), {})
    candidates: dict[str, list[list[Any]]] = pipeline.get("candidates", {})
    ranks = {
        leg: {chunk_id: (rank, score) for rank, (chunk_id, score) in enumerate(items, start=1)}
        for leg, items in candidates.items()
    }
    legs = list(candidates)
    for result in trace.results:
        legs += [leg for leg in result.get("legs", {}) if leg not in legs]

    def leg_cells(chunk_id: int, own: dict[str, Any]) -> list[dict[str, Any]]:
        cells = []
        for leg in legs:
            if leg in own:
                cells.append({"rank": own[leg].get("rank"), "score": own[leg].get("score")})
            elif chunk_id in ranks.get(leg, {}):
                rank, score = ranks[leg][chunk_id]
                cells.append({"rank": rank, "score": score})
            else:
                cells.append({"rank": None, "score": None})
        return cells

    returned = {result["chunk_id"] for result in trace.results}
    missed_ids: dict[int, int] = {}
    for leg in candidates:
        for chunk_id, (rank, _) in ranks[leg].items():
            if chunk_id not in returned:
                missed_ids[chunk_id] = min(rank, missed_ids.get(chunk_id, rank))
    missed_order = sorted(missed_ids, key=lambda chunk_id: missed_ids[chunk_id])[:MAX_MISSED]
    chunks = Chunk.objects.select_related("document").in_bulk([*returned, *missed_order])
    rows = [
        {
            **result,
            "chunk": chunks.get(result["chunk_id"]),
            "legs": leg_cells(result["chunk_id"], result.get("legs", {})),
        }
        for result in trace.results
    ]
    missed = [
        {"chunk_id": chunk_id, "chunk": chunks.get(chunk_id), "legs": leg_cells(chunk_id, {})}
        for chunk_id in missed_order
    ]
    return {
        "legs": legs,
        "rows": rows,
        "missed": missed,
        "pipeline_event": pipeline,
        "stages": [stage_summary(event) for event in events],
    }


def stage_summary(event: dict[str, Any]) -> dict[str, str]:
    """Return a stage's name and its details in one line (candidate lists left out)."""
    parts = []
    for key, value in event.items():
        if key in ("stage", "candidates") or value in (None, "", [], {}):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            value = " · ".join(str(item) for item in value)
        parts.append(f"{key}: {value}")
    return {"stage": str(event.get("stage", "")), "details": "; ".join(parts)[:600]}


@admin.register(QueryTrace)
class QueryTraceAdmin(ScopedAdminMixin, ReadOnlyAdmin):
    """Traces of the collections the user may see; staff whom ``DOCUMENT_ACCESS``
    restricts see only their own (another user's results may name hidden documents)."""

    list_display = [
        "created_at",
        "query",
        "collection",
        "source",
        "pipeline",
        "result_count",
        "ms_label",
        "clicked",
    ]
    list_filter = [
        COLLECTION_FILTER,
        PeriodFilter,
        SourceFilter,
        "pipeline",
        SlowFilter,
        EmptyFilter,
        QueryKeyFilter,
        DayRangeFilter,
    ]
    list_select_related = ["collection"]
    search_fields = ["query"]
    date_hierarchy = "created_at"
    change_list_template = "retrieval/admin/querytrace/change_list.html"
    Media = type("Media", (), MEDIA)

    def get_urls(self) -> list:
        analytics = path(
            "analytics/",
            self.admin_site.admin_view(self.analytics_view),
            name="retrieval_search_analytics",
        )
        return [analytics, *super().get_urls()]

    def analytics_view(self, request: HttpRequest) -> HttpResponse:
        return search_analytics_view(self, request)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The access policy's rule for traces (collections, and own traces only under a
        # document restriction), in place of the mixin's collection rule.
        traces = scope_of(request).restrict_traces(
            super(ScopedAdminMixin, self).get_queryset(request)
        )
        clicks = SearchClick.objects.select_related("document").order_by("position")
        return traces.prefetch_related(Prefetch("clicks", queryset=clicks))

    @admin.display(description="clicks")
    def clicked(self, trace: QueryTrace) -> str:
        """Return the documents followed from this search, each with its position."""
        return (
            format_html_join(
                ", ", "#{} {}", ((c.position, _clicked_title(c)) for c in trace.clicks.all())
            )
            or "—"
        )

    @admin.display(description="ms", ordering="ms")
    def ms_label(self, trace: QueryTrace) -> str:
        return f"{trace.ms:.1f}"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """Show why the results rank as they do, judge them, and replay the query."""
        trace = get_object_or_404(
            self.get_queryset(request).select_related("collection", "user"), pk=object_id
        )
        if not self.has_view_permission(request, trace):
            return super().change_view(request, object_id, form_url, extra_context)
        original = searcher_of(trace.pipeline)
        replay_base = {
            "collection": trace.collection_id,
            "query": trace.query,
            "left": original,
            "top_k": min(max(trace.top_k, 1), 100),
        }
        context = {
            **self.admin_site.each_context(request),
            "title": f"Trace: {trace.query[:80]}",
            "opts": self.opts,
            "trace": trace,
            "explained": explain(trace),
            "replay_url": reverse("admin:retrieval_playground"),
            "replay_base": replay_base,
            "choices": [c for c in searcher_choices() if c[0] != original],
            "replay_example": f"{reverse('admin:retrieval_playground')}?"
            + urlencode({**replay_base, "right": original}),
            "events": pretty_json(trace.trace.get("events", [])),
            "llm_calls": pretty_json(trace.trace.get("llm_calls", [])),
            "filters": pretty_json(trace.filters) if trace.filters else "",
            "media": self.media,
        }
        return TemplateResponse(request, "retrieval/admin/quality/trace.html", context)
