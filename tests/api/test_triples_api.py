"""Triples over the API: list and filter, and an entity's neighbourhood as JSON."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.conftest import editor

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(town) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("u"))
    return client


def test_triples_are_listed_and_filtered(api):
    everything = api.get("/api/triples/", {"collection": "town"}).json()
    assert everything["count"] == 4
    bob = api.get("/api/triples/", {"collection": "town", "entity": "BOB"}).json()["results"]
    assert {(t["subject"], t["predicate"], t["object"]) for t in bob} == {
        ("Bob", "owns", "Carol Corp"),
        ("Alice", "knows", "Bob"),
    }
    sure = api.get("/api/triples/", {"entity": "bob", "min_confidence": 0.5}).json()["results"]
    assert [t["predicate"] for t in sure] == ["owns"] and sure[0]["document"] == "p0"
    owns = api.get("/api/triples/", {"predicate": "OWNS"}).json()["results"]
    assert len(owns) == 1 and owns[0]["chunk"]
    for bad in ({"min_confidence": "high"}, {"chunk": "x"}):
        assert api.get("/api/triples/", bad).status_code == 400


def test_neighbourhood_endpoint_returns_nodes_and_edges_with_chunks(api):
    graph = api.get(
        "/api/triples/neighbourhood/", {"collection": "town", "entity": "bob", "hops": 2}
    ).json()
    assert graph["entity"] == "bob"
    assert {n["id"] for n in graph["nodes"]} == {"bob", "alice", "carol corp", "dave"}
    assert all(edge["chunk_id"] for edge in graph["edges"])
    only = api.get(
        "/api/triples/neighbourhood/",
        {"collection": "town", "entity": "bob", "hops": 2, "predicates": "owns"},
    ).json()
    assert {e["predicate"] for e in only["edges"]} == {"owns"}
    missing = api.get("/api/triples/neighbourhood/", {"collection": "nowhere", "entity": "bob"})
    assert missing.status_code == 404
    assert api.get("/api/triples/neighbourhood/", {"collection": "town"}).status_code == 400
