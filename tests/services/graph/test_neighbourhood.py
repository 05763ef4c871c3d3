"""An entity's neighbourhood as JSON: nodes, triples with their chunks, filters."""

from __future__ import annotations

import pytest

from retrieval.models import Chunk
from retrieval.services.access import Scope
from retrieval.services.graph.entities import merge_entities
from retrieval.services.graph.traversal import neighbourhood
from tests.conftest import TOWN

pytestmark = pytest.mark.django_db


def test_one_hop_lists_nodes_and_triples_with_their_source_chunks(town):
    graph = neighbourhood(town, "BOB", hops=1, scope=Scope.ALL)
    assert graph["entity"] == "bob"
    assert [(n["id"], n["hop"]) for n in graph["nodes"]] == [
        ("bob", 0),
        ("alice", 1),
        ("carol corp", 1),
    ]
    assert {n["id"]: n["label"] for n in graph["nodes"]}["carol corp"] == "Carol Corp"
    edges = {(e["source"], e["predicate"], e["target"]): e for e in graph["edges"]}
    assert set(edges) == {("bob", "owns", "carol corp"), ("alice", "knows", "bob")}
    owns = edges[("bob", "owns", "carol corp")]
    assert Chunk.objects.get(pk=owns["chunk_id"]).content == TOWN[0]
    assert owns["document"] == "p0" and owns["confidence"] == 0.9
    assert graph["chunk_ids"] == sorted(e["chunk_id"] for e in graph["edges"])


def test_hops_predicates_and_confidence_filter_the_walk(town):
    two = neighbourhood(town, "bob", hops=2, scope=Scope.ALL)
    assert {n["id"] for n in two["nodes"]} == {"bob", "alice", "carol corp", "dave"}
    assert {
        e["predicate"] for e in neighbourhood(town, "bob", hops=3, scope=Scope.ALL)["edges"]
    } == {
        "owns",
        "employs",
        "knows",
        "trains",
    }
    confident = neighbourhood(town, "bob", hops=2, min_confidence=0.5, scope=Scope.ALL)
    assert {n["id"] for n in confident["nodes"]} == {"bob", "carol corp", "dave"}
    owns_only = neighbourhood(town, "bob", hops=2, predicates=["owns"], scope=Scope.ALL)
    assert [e["predicate"] for e in owns_only["edges"]] == ["owns"]


def test_an_alias_finds_its_entity_and_an_unknown_name_finds_nothing(town):
    merge_entities(town, "Carol Corp", into="Carol Corporation")
    graph = neighbourhood(town, "carol corp", hops=1, scope=Scope.ALL)
    assert graph["entity"] == "carol corporation"
    assert {e["predicate"] for e in graph["edges"]} == {"owns", "employs"}
    assert neighbourhood(town, "Zed", hops=2, scope=Scope.ALL) == {
        "entity": None,
        "nodes": [],
        "edges": [],
        "chunk_ids": [],
    }
