"""The matrix fails when a face, a tool or a scoped Python function is added without joining it."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
from django.contrib import admin
from django.urls import URLPattern, URLResolver

import retrieval
import retrieval.services
from retrieval.services.access import Scope
from retrieval.services.tools import collection_tools
from tests.scope.faces import ADMIN_MODELS, BROWSE_FACES, QUALITY_MODELS, SEARCH_FACES

pytestmark = pytest.mark.django_db

#: Every URL name of the app, and the face that covers it (or why none need to).
COVERED = {
    "retrieval:search": "search_page",
    "retrieval:document": "search_page (each document's page)",
    "retrieval:login": "none needed: Django's sign-in form, no data",
    "retrieval-api:search": "api_search",
    "retrieval-api:search-batch": "api_batch_search",
    "retrieval-api:tools": "api_tools",
    "retrieval-api:tool-call": "api_tools",
    "retrieval-api:answer": "api_answer",
    "retrieval-api:collection-list": "api_browse (collection detail; test_access lists)",
    "retrieval-api:collection-detail": "api_browse",
    "retrieval-api:document-list": "api_browse",
    "retrieval-api:document-detail": "api_browse",
    "retrieval-api:document-reindex": "api_browse",
    "retrieval-api:chunk-list": "api_browse",
    "retrieval-api:chunk-detail": "api_browse",
    "retrieval-api:triple-list": "api_browse",
    "retrieval-api:triple-detail": "api_browse",
    "retrieval-api:triple-neighbourhood": "api_browse",
    "retrieval-api:indexrun-list": "api_browse",
    "retrieval-api:indexrun-detail": "api_browse (no run is visible to a restricted user)",
    "retrieval-api:indexrun-cancel": "api_browse",
    "retrieval-api:indexrun-retry": "api_browse",
    "retrieval-api:feedback": "api_browse",
    "retrieval-api:click": "search_page (a click on each document)",
    "retrieval-api:suggest": "api_browse",
    "retrieval-api:api-root": "none needed: lists endpoint URLs, no data",
    "retrieval-api:schema": "none needed: the OpenAPI schema, no data",
    "retrieval-api:docs": "none needed: Swagger UI, no data",
    "admin:retrieval_playground": "playground",
    "admin:retrieval_graph_explorer": "graph_explorer",
    "admin:retrieval_graph_neighbourhood": "graph_explorer",
    "admin:retrieval_graph_entities": "graph_explorer",
    "admin:retrieval_indexrun_progress": "admin_browse",
    "admin:retrieval_evalset_import": "admin_quality",
    "admin:retrieval_evalrun_compare": "admin_quality",
    "admin:retrieval_judge": "admin_quality",
    "admin:retrieval_evalset_add_query": "admin_quality",
    "admin:retrieval_search_analytics": "admin_dashboard (with the landing page, app_list)",
    **{
        f"admin:retrieval_{model}_{view}": "admin_quality"
        for model in QUALITY_MODELS
        for view in ("changelist", "add", "change", "history", "delete")
    },
    **{
        f"admin:retrieval_{model}_{view}": "admin_browse"
        for model in ADMIN_MODELS
        for view in ("changelist", "add", "change", "history", "delete")
    },
}


def _names(patterns, namespace: str) -> set[str]:
    names = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            names |= _names(pattern.url_patterns, namespace)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(f"{namespace}:{pattern.name}")
    return names


#: Every tool of ``collection_tools`` and the test that runs it for each user.
TOOLS_COVERED = {
    "retrieve": "api_tools, python_facade",
    "index_document": "api_index_tool (tests/scope/test_writes.py)",
}

#: Every function of the Python API that takes a user or a scope, and who calls it.
PYTHON_COVERED = {
    "retrieval.search": "python_facade",
    "retrieval.search_batch": "python_facade",
    "retrieval.asearch": "python_facade",
    "retrieval.asearch_batch": "python_facade",
    "retrieval.answer": "python_facade",
    "retrieval.aanswer": "python_facade",
    "retrieval.answer_stream": "python_facade",
    "retrieval.services.answers.service.answer": "python_facade (retrieval.answer), api_answer",
    "retrieval.services.tools.answer_tool": "python_facade",
    "retrieval.services.query.search.search": "python_facade (retrieval.search)",
    "retrieval.services.query.search.search_batch": "python_facade (retrieval.search_batch)",
    "retrieval.services.tools.collection_tools": "python_facade",
    "retrieval.services.tools.retrieve_tool": "python_facade (collection_tools)",
    "retrieval.services.tools.index_tool": TOOLS_COVERED["index_document"],
    "retrieval.services.graph.traversal.neighbourhood": "python_facade",
    "retrieval.services.results.page.results_page": "search_page",
    "retrieval.services.results.facets.facet_counts": "search_page (results_page)",
    "retrieval.services.results.clicks.record_click": "search_page (its clicks)",
    "retrieval.services.query.suggestions.suggest": "api_browse (GET /api/suggest/)",
    "retrieval.services.quality.dashboard.collection_figures": "admin_dashboard",
    "retrieval.services.quality.analytics.search_report": "admin_dashboard",
    "retrieval.services.quality.analytics.period_traces": "admin_dashboard (search_report)",
    "retrieval.services.quality.analytics.report_period": "admin_dashboard (search_report)",
    "retrieval.services.quality.answer_analytics.answer_report": "admin_dashboard",
    "retrieval.services.answers.votes.vote_on_answer": "api_answer_vote (writes)",
    "retrieval.services.answers.votes.votable_answers": "api_answer_vote (vote_on_answer)",
    "retrieval.services.ingestion.documents.store_uploads": "api_add_document, admin_add_document",
    "retrieval.services.ingestion.collections.update_collection": (
        "python_change_collection_access, api_change_collection, admin_change_collection (writes)"
    ),
    "retrieval.services.ingestion.documents.delete_documents": "api_delete_document (writes)",
    "retrieval.services.ingestion.documents.authorize_documents": "api_reindex_document (writes)",
}


def scoped_python_api() -> set[str]:
    """The facade's functions, and every public service function with a ``scope`` parameter."""
    found = {f"retrieval.{name}" for name in (*retrieval._FACADE, *retrieval._ANSWERS)}
    root = Path(retrieval.services.__file__).parent
    for path in sorted(root.rglob("*.py")):  # namespace packages (no __init__) included
        parts = path.relative_to(root.parent.parent).with_suffix("").parts
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        for name, value in vars(module).items():
            if (
                not name.startswith("_")
                and inspect.isfunction(value)
                and value.__module__ == module.__name__
                and "scope" in inspect.signature(value).parameters
            ):
                found.add(f"{module.__name__}.{name}")
    return found - {"retrieval.services.access.resolve_scope"}  # the resolver itself


def test_every_python_function_and_tool_is_in_the_matrix(world):
    assert scoped_python_api() == set(PYTHON_COVERED), "add new scoped functions to the matrix"
    tools = {tool.name for tool in collection_tools("Atlas", scope=Scope.ALL)}
    assert tools == set(TOOLS_COVERED), "add new tools to the matrix"


def test_every_face_is_in_the_matrix():
    from retrieval import urls as page_urls
    from retrieval.api import urls as api_urls

    names = _names(page_urls.urlpatterns, "retrieval") | _names(
        api_urls.urlpatterns, "retrieval-api"
    )
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label == "retrieval":
            names |= _names(model_admin.get_urls(), "admin")
    assert names - set(COVERED) == set(), "new faces: add them to the scope matrix"
    assert set(COVERED) - names == set(), "faces that no longer exist: remove them"
    faces = {*SEARCH_FACES, *BROWSE_FACES}
    # Every face but the Python one (no URL) covers URLs.
    assert {value.split(" ")[0] for value in COVERED.values()} - {"none"} == faces - {
        "python_facade"
    }
