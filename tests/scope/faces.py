"""The faces of the scope matrix: each answers (user, collection[, leg]) with what it showed."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

import retrieval
from retrieval.exceptions import CollectionNotFound
from retrieval.models import (
    BlockedSuggestion,
    Chunk,
    Collection,
    Document,
    EvalQuery,
    EvalRun,
    EvalSet,
    HiddenResult,
    IndexRun,
    Judgment,
    Promotion,
    QueryTrace,
    SearchClick,
    Synonym,
    Triple,
)
from retrieval.services.graph.traversal import neighbourhood
from retrieval.services.registry import retrievers
from retrieval.services.tools import answer_tool, collection_tools
from tests.conftest import run_async
from tests.scope.conftest import DOCS, QUERY


def legs() -> list[str]:
    """Every configured retriever: a new one joins the matrix by being configured."""
    return retrievers.aliases()


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


def api_answer(user, name: str, leg: str) -> Answer:
    """The answer as JSON and as a stream, and the trace each one stored."""
    client = api(user)
    body = {"question": QUERY, "collection": name, "retriever": leg}
    with override_settings(RETRIEVAL={**settings.RETRIEVAL, "TRACE_SAMPLE_RATE": 1}):
        plain = client.post("/api/answer/", body, format="json")
        streamed = client.post("/api/answer/", {**body, "stream": True}, format="json")
        # The stream is answered as it is read: read it under the same settings.
        stream = b"".join(streamed.streaming_content) if streamed.status_code == 200 else b""
    assert plain.status_code == streamed.status_code
    if plain.status_code != 200:
        return Answer(plain.status_code, plain.content.decode())
    texts = [plain.content.decode(), stream.decode()]
    ids = re.findall(r'"trace_id": ?(\d+)', " ".join(texts))
    assert len(ids) == 2, texts
    traces = QueryTrace.objects.filter(pk__in=ids).values("query", "results", "trace")
    return Answer(200, " ".join(texts) + json.dumps(list(traces)))


def search_page(user, name: str, leg: str) -> Answer:
    """The results page; then every document's page, and a click on every document with
    the search's click token: the clicks kept are shown by their documents' ids."""
    set_default_retriever(leg)
    client = browser(user)
    params = {"collection": name, "q": QUERY}
    response = client.get(reverse("retrieval:search"), params)
    bodies = [response.content.decode()]
    documents = Document.objects.filter(external_id__in=DOCS.get(name, {}))
    for document in documents:
        page = client.get(reverse("retrieval:document", args=[document.pk]))
        assert page.status_code in (200, 302, 404), page.status_code
        if page.status_code == 200:
            bodies.append(page.content.decode())
    with override_settings(RETRIEVAL={**settings.RETRIEVAL, "TRACE_SAMPLE_RATE": 1}):
        found = client.get(reverse("retrieval:search"), {**params, "format": "json"})
    click = found.json()["click"] if found.status_code == 200 else None
    for document in documents if click else ():
        body = {"token": click["token"], "document": document.pk}
        assert client.post(click["url"], body).status_code == 202
    clicked = SearchClick.objects.filter(trace__user=user.pk, trace__collection__name=name)
    bodies += clicked.values_list("document__external_id", flat=True)
    return Answer(response.status_code, " ".join(bodies))


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
        later = run_async(retrieval.asearch(QUERY, collection=name, user=user, retriever=leg))
        many = run_async(
            retrieval.asearch_batch([QUERY], collection=name, user=user, retriever=leg)
        )
        tool = collection_tools(name, user=user)[0].execute({"query": QUERY, "top_k": 10})
        answered = retrieval.answer(QUERY, collection=name, user=user, retriever=leg)
        answered_later = run_async(
            retrieval.aanswer(QUERY, collection=name, user=user, retriever=leg)
        )
        *_, (_, streamed) = retrieval.answer_stream(
            QUERY, collection=name, user=user, retriever=leg
        )
        tool += answer_tool(collection=name, user=user, retriever=leg).execute({"question": QUERY})
        graph = neighbourhood(name, "North Hub", hops=2, user=user)
    except CollectionNotFound as e:
        return Answer(404, str(e))
    answers = [one, *batch, later, *many]
    body = json.dumps([[r.to_dict() for r in a] + [a.trace] for a in answers]) + tool
    for grounded in (answered, answered_later, streamed):
        body += json.dumps([grounded.to_dict(), grounded.trace])
        body += json.dumps([r.to_dict() for r in grounded.results])
    return Answer(200, body + json.dumps(graph))


SEARCH_FACES: dict[str, Callable[..., Answer]] = {
    "api_search": api_search,
    "api_batch_search": api_batch_search,
    "api_tools": api_tools,
    "api_answer": api_answer,
    "search_page": search_page,
    "playground": playground,
    "python_facade": python_facade,
}


def search_face_params() -> list:
    """``SEARCH_FACES``' names for ``parametrize``: the Python facade's in a committed
    transaction (asearch runs on a worker thread, which sees only committed rows)."""
    return [
        pytest.param(face, marks=pytest.mark.django_db(transaction=True))
        if face == "python_facade"
        else face
        for face in sorted(SEARCH_FACES)
    ]


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
        f"/api/suggest/?collection={slug}&q=mark",  # popular queries name every document
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
    "promotion": Promotion,
    "synonym": Synonym,
    "hiddenresult": HiddenResult,
    "blockedsuggestion": BlockedSuggestion,
}


#: Editors' relevance rules beside promotions (``retrieval/admin/relevance.py``).
RULES = ("synonym", "hiddenresult", "blockedsuggestion")


def admin_browse(user, name: str) -> Answer:
    """Changelists filtered to the collection, and every object's admin pages."""
    client = browser(user)
    pk = collection_pk(name)
    responses = [client.get(reverse("admin:retrieval_playground"))]
    for model_name in ADMIN_MODELS:
        url = reverse(f"admin:retrieval_{model_name}_changelist")
        field = "id" if model_name == "collection" else "collection__id"
        responses.append(client.get(url, {f"{field}__exact": pk}))
        if model_name in ("document", "collection", "promotion", *RULES):
            responses.append(client.get(reverse(f"admin:retrieval_{model_name}_add")))
    ids = DOCS.get(name, {})
    objects = [
        ("document", Document.objects.filter(external_id__in=ids)),
        ("chunk", Chunk.objects.filter(document__external_id__in=ids)),
        ("triple", Triple.objects.filter(chunk__document__external_id__in=ids)),
        ("collection", Collection.objects.filter(name=name)),
        ("promotion", Promotion.objects.filter(collection__name=name)),
        *((rule, ADMIN_MODELS[rule].objects.filter(collection__name=name)) for rule in RULES),
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
    "searchclick": ("trace__collection", SearchClick),
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
    add_query = {"collection": pk, "query": QUERY}
    responses.append(client.get(reverse("admin:retrieval_evalset_add_query"), add_query))
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


#: The tables search analytics downloads as CSV.
ANALYTICS_EXPORTS = [
    "top",
    "no_results",
    "no_clicks",
    "slowest",
    "negative_feedback",
    "series",
    "searchers",
]


def admin_dashboard(user, name: str) -> Answer:
    """The landing page, every list its collection's figures link to, and search
    analytics with each CSV table."""
    client = browser(user)
    pk = collection_pk(name)
    landing = client.get(reverse("admin:app_list", args=["retrieval"]))
    responses = [landing]
    card = re.search(
        rf'<section class="retrieval-card" data-collection="{pk}".*?</section>',
        landing.content.decode(),
        re.S,
    )
    if card is not None:
        links = re.findall(r'href="([^"]+)"', card.group(0))
        assert len(links) > 5, links
        responses += [client.get(html.unescape(link)) for link in links]
    analytics = reverse("admin:retrieval_search_analytics")
    today = timezone.localdate()
    days = {"from": (today - timedelta(days=3)).isoformat(), "to": today.isoformat()}
    for period in ({"period": "30d"}, days):  # a fixed period, a custom range
        period = {"collection": pk, **period}
        responses.append(client.get(analytics, period))
        for table in ANALYTICS_EXPORTS:
            responses.append(client.get(analytics, {**period, "export": table}))
    status = responses[0].status_code
    return Answer(status, " ".join(r.content.decode() for r in responses if r.status_code == 200))


BROWSE_FACES: dict[str, Callable[..., Answer]] = {
    "admin_dashboard": admin_dashboard,
    "api_browse": api_browse,
    "graph_explorer": graph_explorer,
    "admin_browse": admin_browse,
    "admin_quality": admin_quality,
}
