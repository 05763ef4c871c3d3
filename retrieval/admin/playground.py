"""The search playground: one query, two retrievers, their results side by side; its
Answer tab answers the query with the left side's searcher, beside its results."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, QueryTrace
from retrieval.services.access import Scope
from retrieval.services.answers.service import answer
from retrieval.services.query.search import search
from retrieval.services.query.search_log import traced_as, untraced
from retrieval.services.registry import retrievers
from retrieval.services.results.answer_box import answer_box
from retrieval.services.types import RetrievalResult
from retrieval.views import cross_site

from .base import pretty_json, scope_of

PIPELINE_PREFIX = "pipeline:"


def searcher_choices() -> list[tuple[str, str]]:
    """Return what the playground can compare: every configured pipeline and retriever."""
    pipelines = [
        (f"{PIPELINE_PREFIX}{name}", f"pipeline {name}")
        for name in sorted(retrieval_settings.PIPELINES)
    ]
    return pipelines + [(alias, alias) for alias in retrievers.aliases()]


def run_search(
    query: str, *, collection: Collection, searcher: str, top_k: int, scope: Scope
) -> Any:
    if searcher.startswith(PIPELINE_PREFIX):
        pipeline = searcher.removeprefix(PIPELINE_PREFIX)
        return search(query, collection=collection, pipeline=pipeline, top_k=top_k, scope=scope)
    return search(query, collection=collection, retriever=searcher, top_k=top_k, scope=scope)


class PlaygroundForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.all())
    query = forms.CharField(max_length=2000, strip=True)
    left = forms.ChoiceField(label="Left")
    right = forms.ChoiceField(label="Right")
    top_k = forms.IntegerField(label="Top k", min_value=1, max_value=100, initial=10)

    def __init__(self, *args: Any, scope: Scope, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A hidden collection is not offered, and choosing it reads as an unknown choice.
        self.fields["collection"].queryset = scope.visible_collections()
        choices = searcher_choices()
        for name in ("left", "right"):
            self.fields[name].choices = choices


@dataclass
class AnswerPanel:
    """The Answer tab: the answer's text in pieces (plain, or a citation's number), its
    sources (each linked to the left side's result and the document), and its trace."""

    segments: tuple[tuple[str, int | None], ...] = ()
    sources: list[dict[str, Any]] = field(default_factory=list)
    mode: str = ""
    reason: str = ""
    abstained: bool = False
    trace_id: int | None = None
    error: str = ""


@dataclass
class Column:
    """One side of the comparison: what ran, what it found, how long it took."""

    searcher: str
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    milliseconds: float = 0.0
    trace: str = ""


def playground_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Render the form and, for a complete query, both result lists (errors as messages)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    choices = [alias for alias, _ in searcher_choices()]
    initial = {
        "collection": request.GET.get("collection") or None,
        "left": "bm25" if "bm25" in choices else choices[0] if choices else None,
        "right": "dense" if "dense" in choices else choices[-1] if choices else None,
        "top_k": 10,
    }
    bound = "query" in request.GET
    scope = scope_of(request)
    # A link with a collection and a query (from a trace, analytics, a promotion) searches
    # with the defaults for what it leaves out.
    defaults = {k: v for k, v in initial.items() if k != "collection" and v is not None}
    data = {**defaults, **request.GET.dict()} if bound else None
    form = PlaygroundForm(data, initial=initial, scope=scope)
    columns: list[Column] = []
    answering = bool(request.GET.get("answer"))
    panel = None
    if bound:
        if form.is_valid():
            with traced_as(QueryTrace.Source.PLAYGROUND), untraced(cross_site(request)):
                columns = _compare(form.cleaned_data, scope)
                if answering:
                    panel = _answer(form.cleaned_data, scope, columns[0])
            for column in columns:
                if column.error:
                    messages.error(request, f"{column.searcher}: {column.error}")
            if panel is not None and panel.error:
                messages.error(request, f"Answer: {panel.error}")
        else:
            for name, errors in form.errors.items():
                label = form.fields[name].label or name if name in form.fields else ""
                for error in errors:
                    messages.error(request, f"{str(label).capitalize()}: {error}".lstrip(": "))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Search playground",
        "opts": model_admin.opts,
        "form": form,
        "columns": columns,
        "answer": panel,
        "tabs": _tabs(request, answering) if bound else [],
        "media": model_admin.media,
    }
    return TemplateResponse(request, "retrieval/admin/collection/playground.html", context)


def _compare(data: dict[str, Any], scope: Scope) -> list[Column]:
    columns = [Column(data["left"]), Column(data["right"])]
    for column in columns:
        started = time.perf_counter()
        try:
            results = run_search(
                data["query"],
                collection=data["collection"],
                searcher=column.searcher,
                top_k=data["top_k"],
                scope=scope,
            )
        except (RetrievalError, ValueError) as e:
            column.error = str(e) or e.__class__.__name__
            continue
        column.milliseconds = (time.perf_counter() - started) * 1000
        column.results = [_describe(result) for result in results]
        column.trace = pretty_json(results.trace)
    left, right = columns
    _mark_shared(left, right)
    _mark_shared(right, left)
    return columns


def _tabs(request: HttpRequest, answering: bool) -> list[dict[str, Any]]:
    """Return the Results and Answer tabs: links to this comparison without and with the
    answer."""
    params = request.GET.copy()
    params.pop("answer", None)
    results = f"?{params.urlencode()}"
    params["answer"] = "1"
    return [
        {"label": "Results", "url": results, "current": not answering},
        {"label": "Answer", "url": f"?{params.urlencode()}", "current": answering},
    ]


def _answer(data: dict[str, Any], scope: Scope, left: Column) -> AnswerPanel:
    """Answer the query with the left side's searcher; link each source to that side's
    result holding its passage (or to the document)."""
    searcher = left.searcher
    how = (
        {"pipeline": searcher.removeprefix(PIPELINE_PREFIX)}
        if searcher.startswith(PIPELINE_PREFIX)
        else {"retriever": searcher}
    )
    try:
        made = answer(
            data["query"], collection=data["collection"], scope=scope, top_k=data["top_k"], **how
        )
    except (RetrievalError, ValueError) as e:
        return AnswerPanel(error=str(e) or e.__class__.__name__)
    shown = {item["chunk"].pk for item in left.results}
    sources = []
    for citation in made.citations:
        on_left = next((pk for pk in citation.chunk_ids if pk in shown), None)
        sources.append(
            {
                "number": citation.number,
                "title": citation.title,
                "quote": citation.quote,
                "document_id": citation.document_id,
                "result": f"retrieval-result-0-{on_left}" if on_left else "",
            }
        )
    box = answer_box(made)
    return AnswerPanel(
        segments=box.segments,
        sources=sources,
        mode=made.mode,
        reason=made.reason,
        abstained=made.abstained,
        trace_id=made.trace_id,
    )


def _describe(result: RetrievalResult) -> dict[str, Any]:
    chunk = result.chunk
    metadata = dict(result.metadata)
    legs = metadata.pop("legs", {})
    failed = metadata.pop("failed_legs", {})
    promoted = bool(metadata.pop("promoted", False))
    return {
        "rank": result.rank + 1,
        "score": result.score,
        "chunk": chunk,
        "document": chunk.document,
        "legs": sorted(legs.items()),
        "failed_legs": sorted(failed.items()),
        "extra": pretty_json(metadata) if metadata else "",
        "other_rank": None,
        "promoted": promoted,
        "promotion_id": metadata.get("promotion_id"),
    }


def _mark_shared(column: Column, other: Column) -> None:
    """Note, for each result, its rank in the other list (None if absent)."""
    ranks = {item["chunk"].pk: item["rank"] for item in other.results}
    for item in column.results:
        item["other_rank"] = ranks.get(item["chunk"].pk)
