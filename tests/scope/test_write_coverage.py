"""The write matrix fails when a way to change something is added without joining it."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import URLPattern, URLResolver

from tests.scope.writes import (
    API_FACES,
    NOT_OFFERED,
    READ_ACTIONS,
    ROWS,
    WRITE_FACES,
    admin_actions,
)

pytestmark = pytest.mark.django_db

SAFE = {"get", "head", "options", "trace"}

#: Every (URL name, method) of the app that is not a read, and the face that writes it or
#: why it writes nothing.
API_WRITES = {
    ("retrieval-api:collection-list", "post"): "api_create_collection",
    ("retrieval-api:collection-detail", "patch"): (
        "api_change_collection, api_rename_collection, api_change_collection_access"
    ),
    ("retrieval-api:collection-detail", "put"): "api_replace_collection",
    ("retrieval-api:collection-detail", "delete"): "api_delete_collection",
    ("retrieval-api:document-list", "post"): "api_add_document, api_replace_document",
    ("retrieval-api:document-detail", "delete"): "api_delete_document",
    ("retrieval-api:document-reindex", "post"): "api_reindex_document",
    ("retrieval-api:indexrun-cancel", "post"): "api_cancel_run",
    ("retrieval-api:indexrun-retry", "post"): "api_retry_run",
    ("retrieval-api:feedback", "post"): "api_feedback, api_answer_vote",
    ("retrieval-api:click", "post"): "api_click",
    ("retrieval-api:tool-call", "post"): "api_index_tool (retrieve only reads)",
    ("retrieval-api:search", "post"): "read: a search",
    ("retrieval-api:search-batch", "post"): "read: a batch of searches",
    ("retrieval-api:answer", "post"): "read: a search and its answer",
    ("retrieval:login", "post"): "read: Django's sign-in form (writes the session only)",
    ("retrieval:login", "put"): "read: Django's sign-in form (writes the session only)",
}


#: The admin's own pages (beside Django's add, change, delete, history and lists), and the
#: face that writes through each or why none does.
ADMIN_PAGES = {
    "admin:retrieval_judge": "admin_judge",
    "admin:retrieval_evalset_import": "admin_import_eval_set",
    "admin:retrieval_playground": "read: searches",
    "admin:retrieval_graph_explorer": "read: the graph explorer",
    "admin:retrieval_graph_neighbourhood": "read: the explorer's JSON",
    "admin:retrieval_graph_entities": "read: the explorer's JSON",
    "admin:retrieval_indexrun_progress": "read: progress JSON",
    "admin:retrieval_evalrun_compare": "read: two runs compared",
    "admin:retrieval_evalset_add_query": "admin_add_query_to_set",
    "admin:retrieval_search_analytics": "read: search analytics and its CSV tables",
}
DJANGO_VIEWS = ("_changelist", "_add", "_change", "_delete", "_history", "_autocomplete")


def _methods(pattern: URLPattern) -> set[str]:
    callback = pattern.callback
    actions = getattr(callback, "actions", None)  # a DRF viewset route
    if actions is not None:
        return set(actions)
    view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    if view_class is None:
        return {"get"}
    return {m for m in view_class.http_method_names if hasattr(view_class, m)}


def _writes(patterns, namespace: str) -> set[tuple[str, str]]:
    found = set()
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found |= _writes(pattern.url_patterns, namespace)
        elif isinstance(pattern, URLPattern) and pattern.name:
            name = f"{namespace}:{pattern.name}"
            found |= {(name, method) for method in _methods(pattern) - SAFE}
    return found


def test_every_api_write_is_in_the_matrix():
    from retrieval import urls as page_urls
    from retrieval.api import urls as api_urls

    writes = _writes(api_urls.urlpatterns, "retrieval-api") | _writes(
        page_urls.urlpatterns, "retrieval"
    )
    assert writes == set(API_WRITES), "new ways to write: add them to tests/scope/writes.py"
    named = {
        face.strip().split(" ")[0] for value in API_WRITES.values() for face in value.split(",")
    }
    assert set(API_FACES) <= named | {"read:"}, "faces the list does not name"
    assert named - {"read:"} <= set(API_FACES)


def test_every_admin_write_is_in_the_matrix():
    root = get_user_model().objects.create_superuser("root", password="x")
    request = RequestFactory().get("/")
    request.user = root
    offered = set()
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "retrieval":
            continue
        name = model._meta.model_name
        offered |= {(name, action) for action in model_admin.get_actions(request)}
        if model_admin.has_delete_permission(request):
            assert name in ROWS, f"{name}: its delete page is not in the matrix"
        for view in ("add", "change"):
            if getattr(model_admin, f"has_{view}_permission")(request):
                assert f"admin_{view}_{name}" in WRITE_FACES, f"admin_{view}_{name} is missing"
    assert offered == admin_actions(), "admin actions changed: update NOT_OFFERED"
    pages = {
        f"admin:{pattern.name}"
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label == "retrieval"
        for pattern in model_admin.get_urls()
        if isinstance(pattern, URLPattern) and pattern.name
        and not pattern.name.endswith(DJANGO_VIEWS)
    }  # fmt: skip
    assert pages == set(ADMIN_PAGES), "new admin pages: add them to ADMIN_PAGES"
    for face in ADMIN_PAGES.values():
        assert face.startswith("read:") or face in WRITE_FACES
    for model, action in offered - READ_ACTIONS:
        assert f"admin_action_{model}_{action}" in WRITE_FACES
    assert not offered & NOT_OFFERED
