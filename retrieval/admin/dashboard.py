"""The app's admin landing page (``/admin/retrieval/``): a card per collection.

Django renders ``admin/<app_label>/app_index.html`` for an app's index, so the app ships
``templates/admin/retrieval/app_index.html``, which draws :func:`dashboard_context`
(through ``{% retrieval_dashboard %}``) above Django's list of the app's models. A card
holds the figures of :func:`~retrieval.services.quality.dashboard.collection_figures`
for the collections the user may see, each linking to the filtered list behind it, and
the actions (reindex, rebuild the vector index, evaluate) the user may run: they post
to the changelists' own actions, which authorize every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString

from retrieval.models import (
    Chunk,
    Collection,
    Document,
    EvalRun,
    EvalSet,
    IndexRun,
    Judgment,
    Promotion,
    QueryTrace,
)
from retrieval.services.access import Scope
from retrieval.services.quality.dashboard import CollectionFigures, collection_figures

from .analytics import READERS
from .base import scope_of
from .charts import sparkline_svg

#: Collections on one page of the dashboard.
PAGE_SIZE = 24


@dataclass
class Figure:
    """One number of a card, the list behind it, and how it reads (``tone``)."""

    key: str  # data-figure, for tests and styles
    label: str
    value: str
    url: str = ""
    tone: str = ""  # "bad", "warn", "good" or ""
    title: str = ""


@dataclass
class Action:
    """A button posting a changelist action for this collection's rows."""

    key: str
    label: str
    url: str
    action: str
    choices: list[tuple[int, str]]  # the rows to act on (one is posted)


@dataclass
class Card:
    collection: Collection
    groups: list[tuple[str, list[Figure]]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)
    trend: SafeString | str = ""
    problems: list[str] = field(default_factory=list)


def may_view(scope: Scope, model: type[Model]) -> bool:
    """True if the user may see ``model``'s admin list (Django's view or change permission)."""
    return scope.may("view", model) or scope.may("change", model)


def dashboard_context(request: HttpRequest) -> dict[str, Any]:
    """Return the landing page's cards, one per visible collection of the requested page."""
    scope = scope_of(request)
    parts = {
        part
        for part, model in (
            ("documents", Document),
            ("index", Collection),
            ("runs", IndexRun),
            ("searches", QueryTrace),
            ("evaluations", EvalRun),
            ("promotions", Promotion),
        )
        if may_view(scope, model)
    }
    if not scope.sees_quality:
        parts.discard("evaluations")
    paginator = Paginator(scope.visible_collections().order_by("name", "pk"), PAGE_SIZE)
    page = paginator.get_page(request.GET.get("page"))
    figures = collection_figures(scope=scope, collections=page.object_list, parts=parts)
    shown = [f.collection for f in figures]
    sets = _eval_sets(scope, shown)
    changeable = scope.may_write_each("change", Collection, shown)
    return {
        "cards": [
            _card(f, scope, f.collection.pk in changeable, sets.get(f.collection.pk, []))
            for f in figures
        ],
        "page": page if paginator.num_pages > 1 else None,
        "next": request.get_full_path(),
        "only_own": not scope.sees_quality,
        "now": timezone.now(),
    }


def _url(name: str, *args: Any, **params: Any) -> str:
    url = reverse(name, args=args)
    return f"{url}?{urlencode(params)}" if params else url


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _card(figures: CollectionFigures, scope: Scope, changeable: bool, sets: list[EvalSet]) -> Card:
    collection = figures.collection
    pk = collection.pk
    card = Card(collection)
    in_collection = {"collection__id__exact": pk}
    if figures.documents is not None:
        failed = figures.failed or 0
        content = [
            Figure(
                "documents",
                "documents",
                str(figures.documents),
                _url("admin:retrieval_document_changelist", **in_collection),
            ),
            Figure(
                "failed",
                "failed",
                str(failed),
                _url(
                    "admin:retrieval_document_changelist", status__exact="failed", **in_collection
                ),
                "bad" if failed else "good",
            ),
            Figure(
                "chunks",
                "chunks",
                str(figures.chunks),
                _url("admin:retrieval_chunk_changelist", **in_collection)
                if may_view(scope, Chunk)
                else "",
            ),
        ]
        if figures.promotions is not None:
            content.append(
                Figure(
                    "promotions",
                    "promoted",
                    str(figures.promotions),
                    _url("admin:retrieval_promotion_changelist", **in_collection),
                    title="Active promotions (editors' picks)",
                )
            )
        card.groups.append(("Content", content))
        if failed:
            card.problems.append(f"{failed} document{'s' if failed != 1 else ''} failed")
    if figures.index is not None:
        card.groups.append(("Index", _index_figures(figures, collection)))
        if figures.index.problem or figures.index.last_error:
            card.problems.append(figures.index.problem or "the index reports an error")
    if "runs" in figures.parts:
        card.groups.append(("Last index run", _run_figures(figures, pk)))
        run = figures.last_run
        if run is not None and run.status == IndexRun.Status.FAILED:
            card.problems.append("the last index run failed")
    if figures.searches is not None:
        card.groups.append(("Searches", _search_figures(figures, pk)))
    if "evaluations" in figures.parts:
        group, card.trend = _quality_figures(figures)
        card.groups.append(("Quality", group))
    card.actions = _actions(collection, changeable, sets)
    if figures.searches is not None:
        card.links.append(("analytics", _url("admin:retrieval_search_analytics", collection=pk)))
    card.links.append(("playground", _url("admin:retrieval_playground", collection=pk)))
    return card


def _index_figures(figures: CollectionFigures, collection: Collection) -> list[Figure]:
    index = figures.index
    assert index is not None
    page = _url("admin:retrieval_collection_change", collection.pk)
    backend = index.backend or index.alias
    where = "in PostgreSQL" if index.transactional else "external"
    result = [
        Figure(
            "backend",
            f"index {index.alias}",
            backend,
            page,
            "bad" if index.problem else "",
            index.problem or f"{backend} ({where})",
        ),
        Figure(
            "pending",
            "pending operations",
            str(index.pending),
            page,
            "warn" if index.pending else "good",
            f"oldest from {index.oldest:%Y-%m-%d %H:%M}" if index.oldest else "",
        ),
        Figure(
            "space",
            "embedding space",
            f"{collection.embedder} · {collection.dimensions} d",
            page,
            title=" · ".join(
                part
                for part in (collection.model_name, index.space and f"space {index.space}")
                if part
            ),
        ),
    ]
    if index.last_error:
        result.append(
            Figure(
                "last_error", "last error", index.last_error[:120], page, "bad", index.last_error
            )
        )
    return result


def _run_figures(figures: CollectionFigures, pk: int) -> list[Figure]:
    run = figures.last_run
    runs = _url("admin:retrieval_indexrun_changelist", collection__id__exact=pk)
    if run is None:
        return [Figure("run", "none yet", "—", runs)]
    tone = {"failed": "bad", "succeeded": "good", "cancelled": "warn"}.get(run.status, "warn")
    page = _url("admin:retrieval_indexrun_change", run.pk)
    seconds = run.duration_seconds
    errors = run.documents_failed or len(run.errors)
    first_error = run.errors[0].get("error", "") if run.errors else ""
    return [
        Figure(
            "run",
            f"{run.task} · {run.created_at:%Y-%m-%d %H:%M}",
            run.get_status_display(),
            page,
            tone,
            run.message,
        ),
        Figure(
            "duration",
            "duration",
            "—" if seconds is None else f"{seconds:.1f} s",
            page,
        ),
        Figure(
            "run_errors",
            "errors",
            str(errors),
            page,
            "bad" if errors else "good",
            str(first_error)[:300],
        ),
    ]


def _search_figures(figures: CollectionFigures, pk: int) -> list[Figure]:
    searches = figures.searches
    assert searches is not None
    traces = "admin:retrieval_querytrace_changelist"
    rate = searches.empty_rate
    analytics = _url("admin:retrieval_search_analytics", collection=pk, period="7d")
    return [
        Figure(
            "searches_day",
            "last 24 h",
            str(searches.day),
            _url(traces, collection__id__exact=pk, source=READERS, period="1d"),
        ),
        Figure(
            "searches_week",
            "last 7 d",
            str(searches.week),
            _url(traces, collection__id__exact=pk, source=READERS, period="7d"),
        ),
        Figure(
            "empty_rate",
            "found nothing (7 d)",
            "—" if rate is None else f"{rate:.1%}",
            _url(traces, collection__id__exact=pk, source=READERS, period="7d", empty="yes"),
            "" if rate is None else "bad" if rate >= 0.2 else "warn" if rate >= 0.05 else "good",
        ),
        Figure(
            "latency",
            "p50 / p95 ms (7 d)",
            f"{_ms(searches.p50)} / {_ms(searches.p95)}",
            analytics,
        ),
        Figure(
            "ctr",
            "click-through (7 d)",
            "—" if searches.ctr is None else f"{searches.ctr:.1%}",
            analytics,
            title=f"{searches.clicked} of {searches.clickable} searches with results "
            "from the search page or the API clicked",
        ),
    ]


def _quality_figures(figures: CollectionFigures) -> tuple[list[Figure], SafeString | str]:
    evaluation = figures.evaluation
    if evaluation is None:
        pk = figures.collection.pk
        return [
            Figure(
                "ndcg",
                "nDCG@10",
                "—",
                _url("admin:retrieval_evalset_changelist", collection__id__exact=pk),
                title="No finished evaluation yet",
            )
        ], ""
    run = evaluation.run
    delta = evaluation.delta
    trend = "" if delta is None else f"{delta:+.3f}"
    tone = "" if delta is None or abs(delta) < 0.005 else "good" if delta > 0 else "bad"
    history = _url("admin:retrieval_evalset_change", run.eval_set_id)
    group = [
        Figure(
            "ndcg",
            f"nDCG@10 · {run.eval_set.name} · {run.pipeline}",
            "—" if evaluation.ndcg is None else f"{evaluation.ndcg:.3f}",
            _url("admin:retrieval_evalrun_change", run.pk),
            title=f"run #{run.pk}, {run.created_at:%Y-%m-%d %H:%M}",
        ),
        Figure(
            "trend",
            "since the run before",
            trend or "—",
            history,
            tone,
            "nDCG@10 against the set's run before it with this pipeline; the set's page "
            "draws its history",
        ),
    ]
    return group, sparkline_svg(evaluation.history, label="nDCG@10 of the last runs")


def _eval_sets(scope: Scope, collections: list[Collection]) -> dict[int, list[EvalSet]]:
    """The golden sets the user may evaluate, by collection: those with a query judged
    relevant (an evaluation of any other fails: the feedback set of a new site is empty)."""
    if not scope.sees_quality or not collections:
        return {}
    writable = scope.may_write_each("change", EvalSet, collections)
    judged = EvalSet.objects.filter(
        collection__in=writable,
        queries__judgments__status=Judgment.Status.ACCEPTED,
        queries__judgments__grade__gt=0,
    ).distinct()
    sets: dict[int, list[EvalSet]] = {}
    for eval_set in judged.order_by("name"):
        sets.setdefault(eval_set.collection_id, []).append(eval_set)
    return sets


def _actions(collection: Collection, changeable: bool, sets: list[EvalSet]) -> list[Action]:
    actions = []
    if changeable:
        changelist = reverse("admin:retrieval_collection_changelist")
        choices = [(collection.pk, collection.name)]
        actions += [
            Action("reindex", "Reindex", changelist, "reindex_collections", choices),
            Action("rebuild", "Rebuild the vector index", changelist, "rebuild_indexes", choices),
        ]
    if sets:
        actions.append(
            Action(
                "evaluate",
                "Evaluate",
                reverse("admin:retrieval_evalset_changelist"),
                "evaluate_sets",
                [(eval_set.pk, eval_set.name) for eval_set in sets],
            )
        )
    return actions
