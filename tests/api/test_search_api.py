"""Search with a packed context, batch search, throttling, and the agent tool endpoints."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.test import APIClient

from retrieval.models import Document
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from tests.conftest import editor
from tests.support.openai_server import OpenAIServer, status_fault

OPENAI_EMBEDDER = "retrieval.services.embedders.openai.OpenAIEmbedder"

pytestmark = pytest.mark.django_db

TEXTS = {"n": "North is up on the map.", "e": "East is where the sun rises."}


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user(username="reader"))
    return client


@pytest.fixture
def atlas(keyword_settings):
    collection, _ = get_or_create_collection("atlas")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    return collection


def test_search_results_carry_token_counts_and_a_context_on_request(api, atlas):
    body = {"query": "north", "collection": "atlas", "retriever": "dense", "top_k": 2}
    plain = api.post("/api/search/", body, format="json").json()
    assert "context" not in plain
    assert plain["results"][0]["token_count"] == count_tokens(TEXTS["n"])
    budget = count_tokens("[1] n\nNorth is up on the map.")
    packed = api.post("/api/search/", {**body, "max_tokens": budget}, format="json").json()
    assert packed["context"]["text"] == "[1] n\nNorth is up on the map."
    assert packed["context"]["token_count"] == budget
    assert packed["context"]["results_used"] == 1
    (citation,) = packed["context"]["citations"]
    assert citation["document"] == "n" and (citation["start"], citation["end"]) == (0, 23)
    assert citation["chunk_ids"] == [plain["results"][0]["chunk_id"]]
    bad = api.post("/api/search/", {**body, "max_tokens": 0}, format="json")
    assert bad.status_code == 400 and "max_tokens" in bad.json()


def test_batch_search_answers_each_query_in_order(api, atlas):
    response = api.post(
        "/api/search/batch/",
        {
            "queries": ["east", "north", "up"],
            "collection": "atlas",
            "retriever": "dense",
            "top_k": 1,
            "max_tokens": 50,
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    answers = response.json()["results"]
    assert [a["query"] for a in answers] == ["east", "north", "up"]
    assert [a["results"][0]["document"] for a in answers] == ["e", "n", "n"]
    assert answers[1]["context"]["text"] == "[1] n\nNorth is up on the map."


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"queries": [], "collection": "atlas"}, 400, "queries"),
        ({"queries": ["x"] * 4, "collection": "atlas"}, 400, "queries"),
        ({"queries": "north", "collection": "atlas"}, 400, "queries"),
        ({"queries": ["x"], "collection": "atlas", "top_k": 0}, 400, "top_k"),
        ({"queries": ["x"], "collection": "nowhere"}, 404, "collection"),
    ],
)
def test_bad_batches(api, atlas, retrieval_settings, body, status, field):
    retrieval_settings(MAX_BATCH_QUERIES=3)
    response = api.post("/api/search/batch/", body, format="json")
    assert response.status_code == status and field in response.json()
    if len(body["queries"]) == 4:
        assert "at most 3 (MAX_BATCH_QUERIES)" in response.json()["queries"][0]


def test_the_eleventh_search_in_a_minute_is_throttled(api, atlas, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"retrieval_search": "10/min"},
    }
    cache.clear()
    body = {"query": "north", "collection": "atlas", "retriever": "bm25"}
    statuses = [api.post("/api/search/", body, format="json").status_code for _ in range(10)]
    assert statuses == [200] * 10
    throttled = api.post("/api/search/batch/", {**body, "queries": ["x"]}, format="json")
    assert throttled.status_code == 429 and "Retry-After" in throttled.headers
    assert api.get("/api/collections/").status_code == 200  # other endpoints: not scoped
    other = APIClient()
    other.force_authenticate(get_user_model().objects.create_user(username="other"))
    assert other.post("/api/search/", body, format="json").status_code == 200  # per user
    cache.clear()


@pytest.mark.parametrize("host_classes", [[], ["rest_framework.throttling.ScopedRateThrottle"]])
def test_without_a_rate_searches_are_not_throttled(api, atlas, settings, host_classes):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_CLASSES": host_classes}
    cache.clear()
    body = {"query": "north", "collection": "atlas", "retriever": "bm25"}
    assert {api.post("/api/search/", body, format="json").status_code for _ in range(12)} == {200}


def test_a_host_scoped_throttle_counts_each_search_once(api, atlas, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_CLASSES": ["rest_framework.throttling.ScopedRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"retrieval_search": "3/min"},
    }
    cache.clear()
    body = {"query": "north", "collection": "atlas", "retriever": "bm25"}
    statuses = [api.post("/api/search/", body, format="json").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    cache.clear()


def test_tool_specs_and_calls_over_http(api, atlas):
    reader = api.get("/api/tools/", {"collection": "atlas"})
    assert [spec["function"]["name"] for spec in reader.json()["tools"]] == ["retrieve"]
    api.force_authenticate(editor())  # may add documents: offered the index tool too
    listing = api.get("/api/tools/", {"collection": "atlas"})
    assert listing.status_code == 200
    names = [spec["function"]["name"] for spec in listing.json()["tools"]]
    assert names == ["retrieve", "index_document"]
    assert api.get("/api/tools/").status_code == 400
    assert api.get("/api/tools/", {"collection": "nowhere"}).status_code == 404

    call = {"collection": "atlas", "name": "retrieve"}
    found = api.post(
        "/api/tools/call/", {**call, "arguments": '{"query": "sun", "top_k": 1}'}, format="json"
    )
    assert found.status_code == 200
    assert found.json()["results"][0]["text"] == TEXTS["e"]
    bad = api.post("/api/tools/call/", {**call, "arguments": {"top_k": 1}}, format="json")
    assert bad.status_code == 200
    assert bad.json() == {"error": "retrieve needs the argument 'query'."}
    indexed = api.post(
        "/api/tools/call/",
        {
            "collection": "atlas",
            "name": "index_document",
            "arguments": {"content": "West is left.", "document_id": "w"},
        },
        format="json",
    )
    assert indexed.json() == {"document_id": "w", "status": "indexed", "chunks": 1}
    assert Document.objects.filter(collection=atlas, external_id="w").exists()
    unknown = api.post("/api/tools/call/", {**call, "name": "rm"}, format="json")
    assert unknown.status_code == 400
    assert unknown.json() == {"name": ["Unknown tool 'rm'; available: retrieve, index_document."]}


def test_a_search_whose_embedding_service_does_not_answer_is_a_503(api, retrieval_settings):
    with OpenAIServer(models=("test-embedding",)) as server:
        options = {"model": "test-embedding", "base_url": server.base_url, "dimensions": 16}
        remote = {"BACKEND": OPENAI_EMBEDDER, "OPTIONS": {**options, "max_retries": 0}}
        retrieval_settings(EMBEDDERS={"remote": remote})
        get_or_create_collection("remote", embedder="remote")
        body = {"query": "north", "collection": "remote", "retriever": "dense"}
        assert api.post("/api/search/", body, format="json").status_code == 200
        server.fail_next(status_fault(500))
        answer = api.post("/api/search/", body, format="json")
        assert answer.status_code == 503, answer.content
        detail = answer.json()["detail"]
        assert "'test-embedding'" in detail and "did not answer" in detail
        server.fail_next(status_fault(500))
        batch = {"queries": ["north"], "collection": "remote", "retriever": "dense"}
        assert api.post("/api/search/batch/", batch, format="json").status_code == 503


def test_schema_covers_the_new_endpoints(api):
    paths = api.get("/api/schema/", {"format": "json"}).json()["paths"]
    assert {"/api/search/batch/", "/api/tools/", "/api/tools/call/"} <= set(paths)
    batch = paths["/api/search/batch/"]["post"]
    assert batch["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "BatchSearch"
    )
    search = paths["/api/search/"]["post"]["responses"]["200"]["content"]["application/json"]
    assert search["schema"]["$ref"].endswith("SearchResponse")
