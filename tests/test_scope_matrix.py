"""Who sees what: every face x every retriever x every kind of user, and no leak.

Two collections, five documents, each document of one team; ``tests.scope_access``
grants collections and teams per user. Every document says "North is up" and links
the shared entity North Hub to its own marker word, so an unscoped leg (BM25,
dense, the graph walk, PRF feedback in agentic rounds, the trace) would show a
hidden document's marker or external id. For each face, leg, user and collection
the test finds which documents a response shows and compares them with what the
grants allow; a hidden collection must answer exactly like a missing one.

The face list is checked against the URL patterns of ``retrieval.urls``,
``retrieval.api.urls`` and the app's admin views, and the legs are the configured
retrievers: a new endpoint or retriever fails :func:`test_every_face_is_in_the_matrix`
until it joins.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, Permission
from django.test import Client
from django.urls import URLPattern, URLResolver, reverse
from rest_framework.test import APIClient

import retrieval
import retrieval.services
from retrieval.models import (
    Chunk,
    Collection,
    Document,
    EvalQuery,
    EvalRun,
    EvalSet,
    IndexRun,
    Judgment,
    QueryTrace,
    Triple,
)
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.graph.traversal import neighbourhood
from retrieval.services.registry import retrievers
from retrieval.services.scope import Scope
from retrieval.services.search import CollectionNotFound
from retrieval.services.tools import collection_tools
from tests.conftest import collection_of
from tests.scope_access import COLLECTIONS, TEAMS

pytestmark = pytest.mark.django_db

#: collection -> {external id: team}
DOCS = {
    "Atlas": {"doc-atlas-a": "a", "doc-atlas-b": "b", "doc-atlas-pub": "public"},
    "Bestiary": {"doc-best-a": "a", "doc-best-b": "b"},
}
ALL_DOCS = {doc for docs in DOCS.values() for doc in docs}
USERS = ["anonymous", "alice", "bob", "stella", "root"]  # stella: staff; root: superuser
QUERY = "north up"
MISSING = "Nowhere"


def marker(external_id: str) -> str:
    return "mark" + external_id.removeprefix("doc-").replace("-", "")


def visible(username: str, collection: str) -> set[str] | None:
    """What the grants allow in ``collection``: document ids, or None if it is hidden."""
    if username == "root":
        return set(DOCS[collection])
    if collection not in COLLECTIONS.get(username, []):
        return None
    return {doc for doc, team in DOCS[collection].items() if team in TEAMS[username]}


def everything_visible(username: str) -> set[str]:
    return {doc for name in DOCS for doc in visible(username, name) or ()}


def shown(body: str) -> set[str]:
    """The documents a response shows: by external id or by the marker in their text."""
    return {doc for doc in ALL_DOCS if doc in body or marker(doc) in body}


@pytest.fixture
def world(graph_settings, retrieval_settings):
    retrieval_settings(
        COLLECTION_ACCESS="tests.scope_access.collections",
        DOCUMENT_ACCESS="tests.scope_access.documents",
        # The graph leg expands hybrid hits whatever the collection's default retriever.
        RETRIEVERS={
            "graph": {
                "BACKEND": "retrieval.services.retrievers.graph.GraphRetriever",
                "OPTIONS": {"retriever": "hybrid"},
            }
        },
    )
    from retrieval.services.indexing import Source, ingest

    for name, docs in DOCS.items():
        collection = collection_of(name, {})
        ingest(
            collection,
            [
                Source.from_text(
                    f"North is up. North_Hub links {marker(doc)}.",
                    external_id=doc,
                    metadata={"team": team},
                )
                for doc, team in docs.items()
            ],
        )
        extract_graph(collection)
    assert Triple.objects.filter(object_key__startswith="mark").count() == len(ALL_DOCS)
    users = {"anonymous": AnonymousUser()}
    model = get_user_model()
    for username in USERS[1:]:
        user = model.objects.create_user(username=username, password="x")
        if username == "stella":
            user.is_staff = True
            user.save()
            user.user_permissions.set(
                Permission.objects.filter(content_type__app_label="retrieval")
            )
            user = model.objects.get(pk=user.pk)  # no stale permission cache
        if username == "root":
            user.is_staff = user.is_superuser = True
            user.save()
        users[username] = user
    return users


@pytest.fixture
def quality(world, retrieval_settings):
    """Per collection: a golden set judging every chunk, a finished run, and traces."""
    from retrieval.services import goldens
    from retrieval.services.eval_runs import create_eval_run

    retrieval_settings(TRACE_SAMPLE_RATE=1)
    for name in DOCS:
        collection = Collection.objects.get(name=name)
        eval_set = EvalSet.objects.create(name=f"{name} gold", collection=collection)
        for chunk in Chunk.objects.filter(collection=collection).select_related("document"):
            goldens.judge(eval_set, QUERY, chunk, grade=1)
        run = create_eval_run(eval_set, "default", top_k=10, sync=True)
        assert run.status == EvalRun.Status.SUCCEEDED, run.message
        retrieval.search(QUERY, collection=name, user=world["root"])  # names every document
    retrieval.search(QUERY, collection="Bestiary", user=world["stella"])  # her own trace
    assert QueryTrace.objects.filter(user=world["stella"]).count() == 1
    retrieval_settings(TRACE_SAMPLE_RATE=0)


@dataclass
class Answer:
    status: int
    body: str


def browser(user) -> Client:
    client = Client()
    if user.is_authenticated:
        client.force_login(user)
    return client


def api(user) -> APIClient:
    client = APIClient()
    if user.is_authenticated:
        client.force_authenticate(user)
    return client


def set_default_retriever(leg: str) -> None:
    """The search page and the tools search with the collection's default retriever."""
    Collection.objects.update(default_retriever=leg)


def collection_pk(name: str) -> int:
    found = Collection.objects.filter(name=name).first()
    return found.pk if found else 999_999


# Faces that search: (user, collection name, leg) -> Answer.


def api_search(user, name: str, leg: str) -> Answer:
    body = {"query": QUERY, "collection": name, "retriever": leg, "top_k": 10}
    response = api(user).post("/api/search/", body, format="json")
    return Answer(response.status_code, response.content.decode())


def api_batch_search(user, name: str, leg: str) -> Answer:
    body = {"queries": [QUERY, "north"], "collection": name, "retriever": leg, "top_k": 10}
    response = api(user).post("/api/search/batch/", body, format="json")
    return Answer(response.status_code, response.content.decode())


def api_tools(user, name: str, leg: str) -> Answer:
    set_default_retriever(leg)
    client = api(user)
    listed = client.get("/api/tools/", {"collection": name})
    call = {"collection": name, "name": "retrieve", "arguments": {"query": QUERY, "top_k": 10}}
    called = client.post("/api/tools/call/", call, format="json")
    assert listed.status_code == called.status_code
    return Answer(called.status_code, listed.content.decode() + called.content.decode())


def search_page(user, name: str, leg: str) -> Answer:
    set_default_retriever(leg)
    response = browser(user).get(reverse("retrieval:search"), {"collection": name, "q": QUERY})
    return Answer(response.status_code, response.content.decode())


def playground(user, name: str, leg: str) -> Answer:
    params = {
        "collection": collection_pk(name),
        "query": QUERY,
        "left": leg,
        "right": leg,
        "top_k": 10,
    }
    response = browser(user).get(reverse("admin:retrieval_playground"), params)
    body = response.content.decode()
    if response.status_code == 200 and not response.context["columns"]:
        # Not searched: only the form's error remains (a hidden collection is not a choice).
        body = " ".join(str(m) for m in response.context["messages"])
    return Answer(response.status_code, body)


def python_facade(user, name: str, leg: str) -> Answer:
    try:
        one = retrieval.search(QUERY, collection=name, user=user, retriever=leg, top_k=10)
        batch = retrieval.search_batch([QUERY], collection=name, user=user, retriever=leg)
        later = async_to_sync(retrieval.asearch)(QUERY, collection=name, user=user, retriever=leg)
        many = async_to_sync(retrieval.asearch_batch)(
            [QUERY], collection=name, user=user, retriever=leg
        )
        tool = collection_tools(name, user=user)[0].execute({"query": QUERY, "top_k": 10})
        graph = neighbourhood(name, "North Hub", hops=2, user=user)
    except CollectionNotFound as e:
        return Answer(404, str(e))
    answers = [one, *batch, later, *many]
    body = json.dumps([[r.to_dict() for r in a] + [a.trace] for a in answers]) + tool
    return Answer(200, body + json.dumps(graph))


SEARCH_FACES: dict[str, Callable[..., Answer]] = {
    "api_search": api_search,
    "api_batch_search": api_batch_search,
    "api_tools": api_tools,
    "search_page": search_page,
    "playground": playground,
    "python_facade": python_facade,
}


# Faces that browse (no retriever): (user, collection name) -> Answer.


def api_browse(user, name: str) -> Answer:
    client = api(user)
    slug = name.lower()
    urls = [
        f"/api/collections/{slug}/",
        f"/api/documents/?collection={slug}",
        f"/api/chunks/?collection={slug}",
        f"/api/triples/?collection={slug}",
        f"/api/triples/neighbourhood/?collection={slug}&entity=North%20Hub&hops=2",
        "/api/index-runs/",
    ]
    ids = DOCS.get(name, {})
    for document in Document.objects.filter(external_id__in=ids):
        urls.append(f"/api/documents/{document.pk}/")
        urls += [f"/api/chunks/{pk}/" for pk in document.chunks.values_list("pk", flat=True)]
        triples = Triple.objects.filter(chunk__document=document).values_list("pk", flat=True)
        urls += [f"/api/triples/{pk}/" for pk in triples]
    responses = [client.get(url) for url in urls]
    for document in Document.objects.filter(external_id__in=ids):
        responses.append(client.post(f"/api/documents/{document.pk}/reindex/"))
        for chunk in document.chunks.all():
            vote = {"collection": slug, "query": QUERY, "chunk_id": chunk.pk, "relevant": True}
            responses.append(client.post("/api/feedback/", vote, format="json"))
    for run in IndexRun.objects.filter(collection__name=name):
        responses.append(client.post(f"/api/index-runs/{run.pk}/retry/"))
        responses.append(client.post(f"/api/index-runs/{run.pk}/cancel/"))
    status = responses[0].status_code
    bodies = [r.content.decode() for r in responses if r.status_code < 400]
    return Answer(status, " ".join(bodies))


def graph_explorer(user, name: str) -> Answer:
    client = browser(user)
    pk = collection_pk(name)
    responses = [
        client.get(reverse("admin:retrieval_graph_explorer", args=[pk])),
        client.get(
            reverse("admin:retrieval_graph_neighbourhood", args=[pk]),
            {"entity": "North Hub", "hops": 2},
        ),
        client.get(reverse("admin:retrieval_graph_entities", args=[pk]), {"q": "mark"}),
    ]
    statuses = {r.status_code for r in responses}
    assert len(statuses) == 1, statuses
    return Answer(statuses.pop(), " ".join(r.content.decode() for r in responses))


ADMIN_MODELS = {
    "collection": Collection,
    "document": Document,
    "chunk": Chunk,
    "triple": Triple,
    "entity": None,
    "indexrun": IndexRun,
}


def admin_browse(user, name: str) -> Answer:
    """Changelists filtered to the collection, and every object's admin pages."""
    client = browser(user)
    pk = collection_pk(name)
    responses = [client.get(reverse("admin:retrieval_playground"))]
    for model_name in ADMIN_MODELS:
        url = reverse(f"admin:retrieval_{model_name}_changelist")
        field = "id" if model_name == "collection" else "collection__id"
        responses.append(client.get(url, {f"{field}__exact": pk}))
        if model_name in ("document", "collection"):
            responses.append(client.get(reverse(f"admin:retrieval_{model_name}_add")))
    ids = DOCS.get(name, {})
    objects = [
        ("document", Document.objects.filter(external_id__in=ids)),
        ("chunk", Chunk.objects.filter(document__external_id__in=ids)),
        ("triple", Triple.objects.filter(chunk__document__external_id__in=ids)),
        ("collection", Collection.objects.filter(name=name)),
    ]
    for model_name, queryset in objects:
        for obj in queryset:
            for view in ("change", "history", "delete"):
                url = reverse(f"admin:retrieval_{model_name}_{view}", args=[obj.pk])
                responses.append(client.get(url))
    runs = ",".join(str(pk) for pk in IndexRun.objects.values_list("pk", flat=True))
    responses.append(client.get(reverse("admin:retrieval_indexrun_progress"), {"ids": runs}))
    status = responses[0].status_code
    return Answer(status, " ".join(r.content.decode() for r in responses if r.status_code == 200))


#: The quality screens' models, and the path from each to its collection.
QUALITY_MODELS = {
    "querytrace": ("collection", QueryTrace),
    "evalset": ("collection", EvalSet),
    "evalquery": ("eval_set__collection", EvalQuery),
    "judgment": ("query__eval_set__collection", Judgment),
    "evalrun": ("eval_set__collection", EvalRun),
}


def admin_quality(user, name: str) -> Answer:
    """Traces, golden sets, queries, judgments and runs: lists, pages, import, compare, judge."""
    client = browser(user)
    pk = collection_pk(name)
    first = reverse("admin:retrieval_querytrace_changelist")
    responses = [client.get(first, {"collection__id__exact": pk})]
    for model_name, (path, model) in QUALITY_MODELS.items():
        url = reverse(f"admin:retrieval_{model_name}_changelist")
        responses.append(client.get(url, {f"{path}__id__exact": pk}))
        responses.append(client.get(reverse(f"admin:retrieval_{model_name}_add")))
        for obj in model.objects.filter(**{f"{path}__name": name}):
            for view in ("change", "history", "delete"):
                url = reverse(f"admin:retrieval_{model_name}_{view}", args=[obj.pk])
                responses.append(client.get(url))
    responses.append(client.get(reverse("admin:retrieval_evalset_import")))
    for run in EvalRun.objects.filter(eval_set__collection__name=name):
        compare = {"first": run.pk, "second": run.pk}
        responses.append(client.get(reverse("admin:retrieval_evalrun_compare"), compare))
    for eval_set in EvalSet.objects.all():  # every set and every chunk, hidden ones too
        for chunk in Chunk.objects.filter(document__external_id__in=DOCS.get(name, {})):
            vote = {"eval_set": eval_set.pk, "chunk": chunk.pk, "grade": 1, "query": "judged"}
            responses.append(client.post(reverse("admin:retrieval_judge"), vote))
    bodies = [r.content.decode() for r in responses if r.status_code == 200]
    if user.is_authenticated:  # what this user's judging wrote
        bodies += Judgment.objects.filter(created_by=user).values_list("target", flat=True)
    return Answer(responses[0].status_code, " ".join(bodies))


BROWSE_FACES: dict[str, Callable[..., Answer]] = {
    "api_browse": api_browse,
    "graph_explorer": graph_explorer,
    "admin_browse": admin_browse,
    "admin_quality": admin_quality,
}

#: Every URL name of the app, and the face that covers it (or why none need to).
COVERED = {
    "retrieval:search": "search_page",
    "retrieval-api:search": "api_search",
    "retrieval-api:search-batch": "api_batch_search",
    "retrieval-api:tools": "api_tools",
    "retrieval-api:tool-call": "api_tools",
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
    "index_document": "test_the_index_tool_never_replaces_a_document_its_caller_cannot_read",
}

#: Every function of the Python API that takes a user or a scope, and who calls it.
PYTHON_COVERED = {
    "retrieval.search": "python_facade",
    "retrieval.search_batch": "python_facade",
    "retrieval.asearch": "python_facade",
    "retrieval.asearch_batch": "python_facade",
    "retrieval.services.search.search": "python_facade (retrieval.search)",
    "retrieval.services.search.search_batch": "python_facade (retrieval.search_batch)",
    "retrieval.services.tools.collection_tools": "python_facade",
    "retrieval.services.tools.retrieve_tool": "python_facade (collection_tools)",
    "retrieval.services.tools.index_tool": TOOLS_COVERED["index_document"],
    "retrieval.services.graph.traversal.neighbourhood": "python_facade",
}


def scoped_python_api() -> set[str]:
    """The facade's functions, and every public service function with a ``scope`` parameter."""
    found = {f"retrieval.{name}" for name in retrieval._FACADE}
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
    return found - {"retrieval.services.scope.resolve_scope"}  # the resolver itself


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


def legs() -> list[str]:
    return retrievers.aliases()


def check(face: str, leg: str, username: str, name: str, answer: Answer, missing: Answer) -> None:
    allowed = visible(username, name)
    where = f"{face} / {leg} / {username} / {name}"
    found = shown(answer.body)
    # The admin's changelists ignore a collection filter they do not offer (a hidden or
    # missing collection): they then list everything the user may see.
    wide = face in ("admin_browse", "admin_quality")
    may_see = everything_visible(username) if wide else (allowed or set())
    leaked = found - may_see
    assert not leaked, f"{where}: leaked {sorted(leaked)}"
    if allowed is None:
        # Hidden: exactly what a missing collection answers.
        assert answer.status == missing.status, where
        assert shown(answer.body) == shown(missing.body), where
        if face in SAME_BODY:
            assert answer.body.replace(name, MISSING) == missing.body, where
    elif answer.status == 200:
        assert found >= allowed and (wide or found == allowed), (
            f"{where}: showed {sorted(found)}, allowed {sorted(allowed)}"
        )
        hidden_names = [other for other in DOCS if visible(username, other) is None]
        for other in hidden_names:
            assert other.lower() not in answer.body.lower(), f"{where}: names {other}"
    else:
        # Refused as a whole: anonymous API calls, admin pages for non-staff.
        assert answer.status in (302, 401, 403), where
        assert (username, face) in REFUSED, where


#: Faces whose whole answer is compared with a missing collection's (the admin pages
#: carry per-request CSRF tokens and object ids; their status and content are checked).
SAME_BODY = {*SEARCH_FACES, "api_browse", "graph_explorer"}

#: Who is refused a face as a whole (login or staff required).
REFUSED = {
    *(("anonymous", face) for face in (*SEARCH_FACES, *BROWSE_FACES) if face != "python_facade"),
    *((user, face) for user in ("alice", "bob") for face in ("playground", "graph_explorer")),
    *((user, face) for user in ("alice", "bob") for face in ("admin_browse", "admin_quality")),
}


@pytest.mark.parametrize(
    "face",
    [
        # asearch runs on a worker thread, which sees only committed rows.
        pytest.param(face, marks=pytest.mark.django_db(transaction=True))
        if face == "python_facade"
        else face
        for face in sorted(SEARCH_FACES)
    ],
)
def test_search_faces_show_each_user_only_what_they_may_see(world, face):
    run = SEARCH_FACES[face]
    assert set(legs()) >= {"bm25", "dense", "hybrid", "graph", "agentic"}
    for leg in legs():
        for username in USERS:
            user = world[username]
            for name in DOCS:
                allowed = visible(username, name)
                answer = run(user, name, leg)
                missing = run(user, MISSING, leg) if allowed is None else None
                check(face, leg, username, name, answer, missing)


@pytest.mark.parametrize("face", sorted(BROWSE_FACES))
def test_browse_faces_show_each_user_only_what_they_may_see(world, quality, face):
    run = BROWSE_FACES[face]
    for username in USERS:
        user = world[username]
        for name in DOCS:
            allowed = visible(username, name)
            answer = run(user, name)
            missing = run(user, MISSING) if allowed is None else None
            check(face, "-", username, name, answer, missing)


def test_the_service_layer_refuses_to_run_without_a_user_or_scope(world):
    with pytest.raises(TypeError, match="needs user= .* or scope="):
        retrieval.search(QUERY, collection="Atlas")
    with pytest.raises(TypeError, match="needs user="):
        retrieval.search_batch([QUERY], collection="Atlas")
    with pytest.raises(TypeError, match="needs user="):
        async_to_sync(retrieval.asearch)(QUERY, collection="Atlas")
    with pytest.raises(TypeError, match="needs user="):
        collection_tools("Atlas")
    with pytest.raises(TypeError, match="needs user="):
        neighbourhood(Collection.objects.get(name="Atlas"), "North Hub")
    with pytest.raises(TypeError, match="not both"):
        retrieval.search(QUERY, collection="Atlas", user=world["root"], scope=retrieval.Scope.ALL)
    every = retrieval.search(QUERY, collection="Bestiary", scope=retrieval.Scope.ALL, top_k=10)
    assert shown(json.dumps([r.to_dict() for r in every])) == set(DOCS["Bestiary"])


def test_a_document_hook_may_return_a_queryset_and_filters_cannot_widen_it(
    world, retrieval_settings
):
    retrieval_settings(DOCUMENT_ACCESS="tests.scope_access.documents_as_queryset")
    hidden = Document.objects.get(external_id="doc-atlas-b")
    for leg in legs():
        results = retrieval.search(
            QUERY,
            collection="Atlas",
            user=world["alice"],
            retriever=leg,
            filters={"document_ids": [hidden.pk]},
        )
        assert list(results) == [], leg
        # The filter narrows within the scope.
        own = Document.objects.get(external_id="doc-atlas-a")
        narrowed = retrieval.search(
            QUERY, collection="Atlas", user=world["alice"], retriever=leg,
            filters={"document_ids": [own.pk, hidden.pk]},
        )  # fmt: skip
        assert {r.chunk.document.external_id for r in narrowed} == {"doc-atlas-a"}, leg


def test_the_index_tool_never_replaces_a_document_its_caller_cannot_read(world):
    hidden = Document.objects.get(external_id="doc-atlas-b")
    call = {
        "collection": "Atlas",
        "name": "index_document",
        "arguments": {"content": "overwritten", "document_id": "doc-atlas-b"},
    }
    refused = api(world["alice"]).post("/api/tools/call/", call, format="json")
    assert refused.status_code == 200
    assert refused.json() == {
        "error": "Document 'doc-atlas-b' cannot be written; choose another id."
    }
    tool = {t.name: t for t in collection_tools("Atlas", user=world["alice"])}["index_document"]
    assert json.loads(tool.execute(call["arguments"])) == refused.json()
    assert Document.objects.get(pk=hidden.pk).content_hash == hidden.content_hash
    # A hidden collection is unknown to the tool endpoint too.
    elsewhere = api(world["alice"]).post(
        "/api/tools/call/", {**call, "collection": "Bestiary"}, format="json"
    )
    assert elsewhere.status_code == 404
    assert elsewhere.json() == {"collection": ["No collection 'Bestiary'."]}
    # Who may read it may replace it.
    allowed = json.loads(
        {t.name: t for t in collection_tools("Atlas", user=world["bob"])}["index_document"].execute(
            call["arguments"]
        )
    )
    assert allowed["status"] == "indexed"
    assert Document.objects.get(pk=hidden.pk).content_hash != hidden.content_hash


def test_staff_restricted_to_collections_only_see_their_quality_records(
    world, quality, retrieval_settings
):
    retrieval_settings(DOCUMENT_ACCESS=None)  # stella: every document of Bestiary, no Atlas
    client = browser(world["stella"])
    for model_name, (path, model) in QUALITY_MODELS.items():
        listed = client.get(reverse(f"admin:retrieval_{model_name}_changelist"))
        assert listed.status_code == 200, model_name
        rows = set(listed.context["cl"].result_list)
        assert rows == set(model.objects.filter(**{f"{path}__name": "Bestiary"})), model_name
        assert rows, model_name  # root's trace of Bestiary too, not only her own
        missing = client.get(reverse(f"admin:retrieval_{model_name}_change", args=[999_999]))
        for obj in model.objects.filter(**{f"{path}__name": "Atlas"}):
            url = reverse(f"admin:retrieval_{model_name}_change", args=[obj.pk])
            assert client.get(url).status_code == missing.status_code != 200, model_name
    atlas_set = EvalSet.objects.get(name="Atlas gold")
    chunk = Chunk.objects.filter(collection__name="Atlas").first()
    before = Judgment.objects.count()
    vote = {"eval_set": atlas_set.pk, "chunk": chunk.pk, "grade": 0, "query": "judged"}
    client.post(reverse("admin:retrieval_judge"), vote)
    assert Judgment.objects.count() == before
    runs = EvalRun.objects.order_by("pk")
    compare = {"first": runs[0].pk, "second": runs[0].pk}  # Atlas's run
    shown_runs = client.get(reverse("admin:retrieval_evalrun_compare"), compare, follow=True)
    assert "Choose two existing runs to compare." in shown_runs.content.decode()
