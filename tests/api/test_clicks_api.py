"""``POST /api/clicks/``: a click on a result of a kept search, once, scoped, CSRF-safe."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.test import Client, override_settings

from retrieval.models import Collection, Document, QueryTrace, SearchClick
from retrieval.services.results.clicks import click_token
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db


def team_a_only(user) -> Q:
    return Q(metadata__team="a")


@pytest.fixture
def searched(keyword_settings, retrieval_settings, django_user_model):
    """A reader's kept search for "penguins": (client, click token, documents by id)."""
    retrieval_settings(TRACE_SAMPLE_RATE=1, DOCUMENT_ACCESS="tests.api.test_clicks_api.team_a_only")
    collection_of("atlas", {})
    from retrieval.services.ingestion.ingest import Source, ingest

    texts = {
        "birds.txt": ("Penguins live in Antarctica.", "a"),
        "seals.txt": ("Seals hunt penguins.", "a"),
        "secret.txt": ("Secret penguins nest here.", "b"),
        "volcano.txt": ("Volcanoes erupt molten rock.", "a"),
    }
    ingest(
        Collection.objects.get(name="atlas"),
        [
            Source.from_text(text, external_id=key, metadata={"team": team})
            for key, (text, team) in texts.items()
        ],
    )
    Collection.objects.update(default_retriever="bm25")
    client = Client()
    client.force_login(django_user_model.objects.create_user(username="reader"))
    body = client.get("/", {"collection": "atlas", "q": "penguins", "format": "json"}).json()
    assert [g["document"] for g in body["results"]] == ["birds.txt", "seals.txt"]
    documents = dict(Document.objects.values_list("external_id", "pk"))
    return client, body["click"], documents


def click(client, found, document: int, **extra):
    return client.post(found["url"], {"token": found["token"], "document": document}, **extra)


def test_a_click_is_kept_once_with_the_documents_position_in_the_search(searched):
    client, found, documents = searched
    assert found["url"] == "/api/clicks/"
    answers = [click(client, found, documents["seals.txt"]) for _ in range(3)]
    assert [a.status_code for a in answers] == [202, 202, 202]
    trace = QueryTrace.objects.get()
    assert list(trace.clicks.values_list("document__external_id", "position")) == [("seals.txt", 2)]
    assert click(client, found, documents["birds.txt"]).status_code == 202
    assert trace.clicks.count() == 2


def test_a_click_the_reader_may_not_make_answers_like_a_kept_one(searched):
    client, found, documents = searched
    kept = click(client, found, documents["birds.txt"])
    for dropped in (
        documents["secret.txt"],  # hidden from the reader
        documents["volcano.txt"],  # not among the search's results
        max(documents.values()) + 1000,  # no such document
    ):
        answer = click(client, found, dropped)
        assert (answer.status_code, answer.content) == (kept.status_code, kept.content)
    assert list(SearchClick.objects.values_list("document__external_id", flat=True)) == [
        "birds.txt"
    ]


def test_a_token_must_be_ours_and_the_readers(searched, django_user_model):
    client, found, documents = searched
    birds = documents["birds.txt"]
    forged = client.post(found["url"], {"token": found["token"] + "x", "document": birds})
    assert forged.status_code == 400 and "token" in forged.json()
    other = Client()
    other.force_login(django_user_model.objects.create_user(username="other"))
    assert click(other, found, birds).status_code == 400  # another reader's search
    assert click(Client(), found, birds).status_code == 400  # nobody signed in
    trace = QueryTrace.objects.get()
    own = {"url": found["url"], "token": click_token(trace.pk, None)}
    assert click(other, own, birds).status_code == 400  # a visitor's token
    assert client.post(found["url"], {"token": found["token"]}).status_code == 400
    assert not SearchClick.objects.exists()


def test_a_signed_in_reader_s_click_needs_the_csrf_token(searched, django_user_model):
    _, found, documents = searched
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(django_user_model.objects.get(username="reader"))
    assert click(strict, found, documents["birds.txt"]).status_code == 403
    page = strict.get("/", {"collection": "atlas", "q": "penguins", "format": "json"}).json()
    body = {"token": page["click"]["token"], "document": documents["birds.txt"]}
    csrf = page["click"]["csrf"]
    answer = strict.post(page["click"]["url"], {**body, "csrfmiddlewaretoken": csrf})
    assert answer.status_code == 202  # as the page's beacon sends it, a form body
    assert SearchClick.objects.count() == 1


def test_clicks_are_throttled_under_their_own_scope(searched):
    client, found, documents = searched
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"retrieval_click": "2/min"}}
    cache.clear()
    with override_settings(REST_FRAMEWORK=rest):
        answers = [click(client, found, documents["birds.txt"]).status_code for _ in range(3)]
        searched_again = client.get("/", {"collection": "atlas", "q": "seals"})
    cache.clear()
    assert answers == [202, 202, 429]
    assert searched_again.status_code == 200  # the page is not counted


def test_a_search_not_kept_offers_no_click(searched, retrieval_settings):
    client, _, _ = searched
    retrieval_settings(TRACE_SAMPLE_RATE=0)
    body = client.get("/", {"collection": "atlas", "q": "penguins", "format": "json"}).json()
    assert body["results"] and body["click"] is None
    html = client.get("/", {"collection": "atlas", "q": "penguins"}).content.decode()
    assert "data-click-token" not in html


def test_an_api_search_hands_out_its_click_token(searched, django_user_model, retrieval_settings):
    from rest_framework.test import APIClient

    _, _, documents = searched
    api = APIClient()
    api.force_authenticate(django_user_model.objects.get(username="reader"))
    body = {"query": "seals", "collection": "atlas", "retriever": "bm25"}
    found = api.post("/api/search/", body, format="json").json()
    assert [r["document"] for r in found["results"]] == ["seals.txt"]
    click = {"token": found["click_token"], "document": documents["seals.txt"]}
    assert api.post("/api/clicks/", click, format="json").status_code == 202
    trace = QueryTrace.objects.get(query="seals")
    assert list(trace.clicks.values_list("position", flat=True)) == [1]
    batch = {"queries": ["seals", "penguins"], "collection": "atlas", "retriever": "bm25"}
    answers = api.post("/api/search/batch/", batch, format="json").json()["results"]
    assert all(answer["click_token"] for answer in answers)
    retrieval_settings(TRACE_SAMPLE_RATE=0)
    assert api.post("/api/search/", body, format="json").json()["click_token"] is None
