"""Throttle scopes beyond searches: uploads, other writes and the graph (issue 30).

Each scope is inactive until the host gives it a rate in
``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``; reads are never counted as writes.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import override_settings
from rest_framework.settings import api_settings
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from retrieval.models import Chunk, IndexRun
from tests.conftest import collection_of, editor

pytestmark = pytest.mark.django_db


class HostScopedThrottle(ScopedRateThrottle):
    """A host's own scoped throttle: a scope without a rate is ImproperlyConfigured."""

    @property
    def THROTTLE_RATES(self) -> dict:  # noqa: N802 - DRF's name; read per request for the test
        return api_settings.DEFAULT_THROTTLE_RATES


@pytest.fixture
def rates():
    """Return a function giving throttle scopes rates (and classes) for one test."""
    overrides = []

    def configure(classes: list[str] | None = None, **scopes: str) -> None:
        rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": scopes}
        if classes is not None:
            rest["DEFAULT_THROTTLE_CLASSES"] = classes
        override = override_settings(REST_FRAMEWORK=rest)
        override.enable()
        overrides.append(override)
        cache.clear()

    yield configure
    for override in reversed(overrides):
        override.disable()
    cache.clear()


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("writer"))
    return client


@pytest.fixture
def atlas(keyword_settings):
    return collection_of("atlas", {"n": "North is up on the map."})


def create(api: APIClient, external_id: str) -> int:
    body = {"collection": "atlas", "external_id": external_id, "text": "North again."}
    return api.post("/api/documents/", body, format="json").status_code


def test_uploads_are_throttled_under_their_own_scope(api, atlas, rates):
    rates(retrieval_upload="2/min")
    assert [create(api, f"d{i}") for i in range(3)] == [201, 201, 429]
    assert api.get("/api/documents/").status_code == 200  # reads are not uploads
    patched = api.patch("/api/collections/atlas/", {"description": "maps"}, format="json")
    assert patched.status_code == 200  # another write: its scope has no rate
    other = APIClient()
    other.force_authenticate(editor("other"))
    assert create(other, "d9") == 201  # per user


def test_every_other_write_counts_under_the_write_scope(api, atlas, rates):
    rates(retrieval_write="7/min")
    document = atlas.documents.get()
    chunk = Chunk.objects.get(document=document)
    writes = [
        api.post("/api/collections/", {"name": "Bestiary"}, format="json"),
        api.patch("/api/collections/bestiary/", {"description": "beasts"}, format="json"),
        api.delete("/api/collections/bestiary/"),
        api.post(
            "/api/feedback/",
            {"collection": "atlas", "query": "north", "chunk_id": chunk.pk, "relevant": True},
            format="json",
        ),
        api.post(f"/api/documents/{document.pk}/reindex/"),
        api.post(f"/api/index-runs/{IndexRun.objects.latest('pk').pk}/cancel/"),
        api.post(
            "/api/tools/call/",
            {
                "collection": "atlas",
                "name": "index_document",
                "arguments": {"content": "East.", "document_id": "e"},
            },
            format="json",
        ),
    ]
    assert [w.status_code for w in writes] == [201, 200, 204, 202, 200, 409, 200]
    reads = [
        api.get("/api/collections/"),
        api.get(f"/api/documents/{document.pk}/"),
        api.get("/api/index-runs/"),
        api.post(
            "/api/tools/call/",
            {"collection": "atlas", "name": "retrieve", "arguments": {"query": "north"}},
            format="json",
        ),  # a search, not a write
        api.post("/api/search/", {"query": "north", "collection": "atlas"}, format="json"),
    ]
    assert [r.status_code for r in reads] == [200] * 5
    assert create(api, "d1") == 201  # uploads: their own scope
    throttled = api.delete(f"/api/documents/{document.pk}/")
    assert throttled.status_code == 429 and "Retry-After" in throttled.headers


def test_an_entity_neighbourhood_is_throttled_under_the_graph_scope(api, atlas, rates):
    rates(retrieval_graph="2/min")
    query = {"collection": "atlas", "entity": "north"}
    statuses = [api.get("/api/triples/neighbourhood/", query).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert api.get("/api/triples/", {"collection": "atlas"}).status_code == 200  # a list: free


@pytest.mark.parametrize(
    "classes",
    [
        ["rest_framework.throttling.ScopedRateThrottle"],
        [f"{__name__}.HostScopedThrottle"],
    ],
)
def test_scopes_without_a_rate_are_not_throttled_whatever_the_hosts_classes(
    api, atlas, rates, classes
):
    # DRF's scoped throttles refuse a scope that has no rate (ImproperlyConfigured, a 500).
    rates(classes, retrieval_search="100/min")
    assert [create(api, f"d{i}") for i in range(3)] == [201] * 3
    assert api.patch("/api/collections/atlas/", {}, format="json").status_code == 200
    query = {"collection": "atlas", "entity": "north"}
    assert api.get("/api/triples/neighbourhood/", query).status_code == 200


def test_a_hosts_scoped_throttle_counts_a_scope_it_has_a_rate_for(api, atlas, rates):
    rates([f"{__name__}.HostScopedThrottle"], retrieval_upload="1/min")
    assert [create(api, f"d{i}") for i in range(2)] == [201, 429]
