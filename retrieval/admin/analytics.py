"""Search analytics: a collection's searches over a period, as tables, charts and CSV.

Top queries (with click-through rate and mean click position), queries that found
nothing, queries whose results nobody clicked, the slowest queries, those readers voted
down and the most active searchers (hashed), with volume and latency charts; each table
downloads as CSV. The period is one of :data:`PERIODS` or the days ``from`` … ``to``
(both included). From any query: its traces (with their clicks), the playground, "add
to a golden set" and "promote a document". Answers: their volume, abstention rate and
readers' votes, and the questions most often abstained on. The figures come from
:func:`retrieval.services.quality.analytics.search_report` and
:func:`retrieval.services.quality.answer_analytics.answer_report`, within the user's scope.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from retrieval.models import Collection, Promotion
from retrieval.normalizing import key_of
from retrieval.services.access import Scope
from retrieval.services.quality.analytics import QueryRow, SearchReport, search_report
from retrieval.services.quality.answer_analytics import AnswerReport, answer_report

from .base import EDIT_GOLDEN, scope_of
from .charts import latency_svg, series_table, volume_svg

#: The periods the trace list, the dashboard and search analytics offer: value -> days.
PERIODS = {"1d": 1, "7d": 7, "30d": 30, "90d": 90}
DEFAULT_PERIOD = "7d"
#: The trace list's choice of readers' searches: every source but editors'.
READERS = "readers"


#: The first day a custom range may start on (no search is older; earlier dates would
#: overflow some time zones' arithmetic).
FIRST_DAY = date(1970, 1, 2)
#: The longest custom range, in days: its charts draw a bar a day.
MAX_RANGE_DAYS = 366


def period_label(days: int) -> str:
    return "last 24 hours" if days == 1 else f"last {days} days"


def day_range(first: date | None, last: date | None) -> tuple[datetime, datetime]:
    """Return the period of the days ``first`` to ``last`` (both included, in the current
    time zone; ``last`` defaults to today) as ``[since, until)``, or raise
    :class:`ValidationError` saying what is wrong with them."""
    if first is None:
        raise ValidationError("Give the first day of the range (from).", code="required")
    last = last or timezone.localdate()
    if first < FIRST_DAY or last < FIRST_DAY or last >= date.max:
        raise ValidationError(f"Dates start on {FIRST_DAY.isoformat()}.", code="invalid")
    if last < first:
        raise ValidationError("The range ends (to) before it starts (from).", code="invalid")
    if (last - first).days >= MAX_RANGE_DAYS:
        raise ValidationError(f"A range spans at most {MAX_RANGE_DAYS} days.", code="invalid")
    return _midnight(first), _midnight(last + timedelta(days=1))


def _midnight(day: date) -> datetime:
    moment = datetime.combine(day, time.min)
    if timezone.is_naive(timezone.now()):  # USE_TZ = False
        return moment
    return timezone.make_aware(moment).astimezone(UTC)


class AnalyticsForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.none(), empty_label=None)
    period = forms.ChoiceField(
        choices=[(value, period_label(days)) for value, days in PERIODS.items()]
    )
    editors = forms.BooleanField(
        label="Include editors' searches",
        required=False,
        help_text="The playground's and evaluations' searches, left out of readers' traffic.",
    )

    def __init__(self, *args: Any, scope: Scope, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A hidden collection is not offered; asking for it reads as an unknown choice.
        self.fields["collection"].queryset = scope.visible_collections()
        # "from" is a keyword: these fields are named here, not as class attributes.
        picker = {"widget": forms.DateInput(attrs={"type": "date"}), "required": False}
        self.fields["from"] = forms.DateField(label="From", **picker)
        self.fields["to"] = forms.DateField(label="To", help_text="Both days included.", **picker)

    def clean(self) -> dict[str, Any]:
        """Work out the period: the days from … to when given, else the fixed period."""
        data = super().clean()
        first, last = data.get("from"), data.get("to")
        if first is None and last is None:
            if "period" in data:
                days = PERIODS[data["period"]]
                data["until"] = timezone.now()
                data["since"] = data["until"] - timedelta(days=days)
                data["label"], data["slug"] = period_label(days), data["period"]
            return data
        if "from" in self.errors or "to" in self.errors:
            return data
        try:
            data["since"], data["until"] = day_range(first, last)
        except ValidationError as e:
            self.add_error("from" if e.code == "required" else "to", e)
            return data
        last = last or timezone.localdate()
        data["label"] = f"days {first.isoformat()} to {last.isoformat()}"
        data["slug"] = f"{first.isoformat()}_{last.isoformat()}"
        return data

    def range_params(self) -> dict[str, str]:
        """Return the query parameters of the chosen period, for links and exports."""
        data = self.cleaned_data
        if data.get("from") is None:
            return {"period": data["period"]}
        last = data.get("to") or timezone.localdate()
        return {"from": data["from"].isoformat(), "to": last.isoformat()}


#: The tables a report downloads as CSV: name -> (header, the report's rows as lists).
EXPORTS = {
    "top": [
        "query",
        "searches",
        "no results",
        "avg ms",
        "max ms",
        "last seen",
        "clickable",
        "clicked",
        "ctr",
        "mean click position",
        "searchers",
    ],
    "no_results": ["query", "searches", "last seen"],
    "no_clicks": ["query", "searches", "last seen"],
    "searchers": ["searcher", "searches", "last seen"],
    "slowest": ["query", "searches", "avg ms", "max ms", "last seen"],
    "negative_feedback": ["query", "votes", "last seen"],
    "series": ["start", "searches", "no results", "p50 ms", "p95 ms"],
    "answers": ["answers", "abstained", "abstention rate", "helpful votes", "not helpful votes"],
    "abstained": ["question", "abstentions", "last seen"],
}


def search_analytics_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Render the report of the chosen collection and period, or one of its tables as CSV."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    scope = scope_of(request)
    first = scope.visible_collections().values_list("pk", flat=True).first()
    data = {
        "collection": request.GET.get("collection") or first or "",
        "period": request.GET.get("period") or DEFAULT_PERIOD,
        "editors": request.GET.get("editors") or "",
        "from": request.GET.get("from") or "",
        "to": request.GET.get("to") or "",
    }
    form = AnalyticsForm(data, scope=scope)
    report = None
    if first is not None and form.is_valid():
        chosen = form.cleaned_data
        period = {"since": chosen["since"], "until": chosen["until"], "editors": chosen["editors"]}
        report = search_report(chosen["collection"], scope=scope, **period)
        answers = answer_report(chosen["collection"], scope=scope, **period)
        export = request.GET.get("export")
        if export in EXPORTS:
            return csv_response(report, export, chosen["slug"], answers)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Search analytics",
        "opts": model_admin.opts,
        "form": form,
        "report": report,
        "no_collection": first is None,
        "media": model_admin.media,
    }
    if report is not None:
        period = form.range_params()
        actions = _RowActions(report.collection, period, scope, report.editors)
        context |= {
            "period_label": form.cleaned_data["label"],
            "volume": volume_svg(report.series, report.step),
            "latency": latency_svg(report.series, report.step),
            "series_table": series_table(report.series, report.step),
            "top": actions.rows(report.top),
            "no_results": actions.rows(report.no_results),
            "no_clicks": actions.rows(report.no_clicks),
            "slowest": actions.rows(report.slowest),
            "negative_feedback": (
                actions.rows(report.negative_feedback)
                if report.negative_feedback is not None
                else None
            ),
            "answers": answers,
            "abstained": actions.rows(answers.abstentions),
            "traces_url": actions.traces_url(),
            "export_url": _url(
                "admin:retrieval_search_analytics",
                collection=report.collection.pk,
                **period,
                **({"editors": "on"} if report.editors else {}),
            ),
        }
    return TemplateResponse(request, "retrieval/admin/querytrace/analytics.html", context)


class _RowActions:
    """The links of a query's row: its traces, the playground, a golden set, a promotion."""

    def __init__(
        self, collection: Collection, period: dict[str, str], scope: Scope, editors: bool
    ) -> None:
        self.collection, self.period, self.editors = collection, period, editors
        self.may_add_query = scope.sees_quality and scope.may_write(*EDIT_GOLDEN, collection)
        self.may_promote = scope.may_write("add", Promotion, collection)

    def traces_url(self, **params: Any) -> str:
        """Return the trace list of the report's searches (readers' only, unless editors')."""
        source = {} if self.editors else {"source": READERS}
        return _url(
            "admin:retrieval_querytrace_changelist",
            collection__id__exact=self.collection.pk,
            **self.period,
            **source,
            **params,
        )

    def rows(self, rows: Iterable[QueryRow]) -> list[dict[str, Any]]:
        return [{"row": row, "links": self.links(row.query)} for row in rows]

    def links(self, query: str) -> dict[str, str]:
        pk = self.collection.pk
        links = {
            "traces": self.traces_url(query_key=key_of(query)),
            "playground": _url("admin:retrieval_playground", collection=pk, query=query),
        }
        if self.may_add_query:
            links["golden"] = _url("admin:retrieval_evalset_add_query", collection=pk, query=query)
        if self.may_promote:
            links["promote"] = _url("admin:retrieval_promotion_add", collection=pk, query=query)
        return links


def _url(name: str, **params: Any) -> str:
    return f"{reverse(name)}?{urlencode(params)}"


def csv_response(
    report: SearchReport, table: str, period: str, answers: AnswerReport | None = None
) -> HttpResponse:
    """Return one table of ``report`` (or of ``answers``) as a CSV download, its file
    named after ``period`` (``7d``, or ``2026-01-01_2026-01-31``)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    name = f"search-{report.collection.slug}-{table}-{period}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    writer = csv.writer(response)
    writer.writerow(EXPORTS[table])
    lines = _answer_lines(answers or AnswerReport(), table)
    for line in _lines(report, table) if lines is None else lines:
        writer.writerow([_cell(value) for value in line])
    return response


def _lines(report: SearchReport, table: str) -> list[list[Any]]:
    if table == "series":
        return [[b.start.isoformat(), b.searches, b.empty, b.p50, b.p95] for b in report.series]
    if table == "top":
        return [
            [r.query, r.searches, r.empty, r.avg_ms, r.max_ms, r.last_seen]
            + [r.clickable, r.clicked, r.ctr, r.mean_position, r.searchers]
            for r in report.top
        ]
    if table == "no_results":
        return [[r.query, r.searches, r.last_seen] for r in report.no_results]
    if table == "no_clicks":
        return [[r.query, r.searches, r.last_seen] for r in report.no_clicks]
    if table == "searchers":
        return [[r.key, r.searches, r.last_seen] for r in report.top_searchers]
    if table == "slowest":
        return [[r.query, r.searches, r.avg_ms, r.max_ms, r.last_seen] for r in report.slowest]
    return [[r.query, r.searches, r.last_seen] for r in report.negative_feedback or []]


def _answer_lines(answers: AnswerReport, table: str) -> list[list[Any]] | None:
    """Return the lines of an answers table, ``None`` for the searches' tables."""
    if table == "answers":
        return [
            [answers.answers, answers.abstained, answers.abstention_rate]
            + [answers.helpful, answers.not_helpful]
        ]
    if table == "abstained":
        return [[r.query, r.searches, r.last_seen] for r in answers.abstentions]
    return None


def _cell(value: Any) -> Any:
    """A CSV cell: times in ISO form, numbers rounded, text that a spreadsheet would run as
    a formula (``=``, ``+``, ``-``, ``@`` first) quoted with an apostrophe."""
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 2)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return f"'{value}"
    return value
