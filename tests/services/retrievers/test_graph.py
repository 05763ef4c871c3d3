"""The graph retriever: a base retriever's hits widened along triples, worked out by hand.

Keyword vectors make the dense scores exact: the query "north" scores 1.0 on the
seed chunk and 0.0 on every chunk about "east", so any east chunk in the results
came through the graph, scored 1.0 × 0.8 per hop.
"""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.exceptions import RetrievalError
from retrieval.services.access import Scope
from retrieval.services.collections import get_or_create_collection
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.indexing import Source, ingest
from retrieval.services.retrievers.graph import GraphRetriever, merge
from retrieval.services.search import search
from retrieval.services.types import ScoredChunk

pytestmark = pytest.mark.django_db

PARAGRAPHS = [
    "North. Alice knows Bob.",  # the only chunk dense finds for "north"
    "East. Bob owns Carol_Corp (0.9).",
    "East. Carol_Corp employs Dave (0.7).",
    "East. Bob likes Tea (0.5).",
    "East. Bob likes Cake (0.3).",
    "East up. Dave trains Eve.",
]


@pytest.fixture
def town(graph_settings, retrieval_settings):
    # Only chunks about "north" reach the cut: a chunk dense scores 0 is no base result.
    retrieval_settings(
        RETRIEVERS={
            "strict": {
                "BACKEND": "retrieval.services.retrievers.dense.PgvectorRetriever",
                "OPTIONS": {"score_threshold": 0.5},
            }
        },
        DEFAULT_RETRIEVER="strict",
    )
    collection, _ = get_or_create_collection("town")
    ingest(
        collection,
        [Source.from_text(text, external_id=f"p{i}") for i, text in enumerate(PARAGRAPHS)],
    )
    extract_graph(collection)
    return collection


def graph(**options) -> GraphRetriever:
    retriever = GraphRetriever(retriever="strict", **options)
    retriever.alias = "test-graph"
    return retriever


def _texts(results):
    return [r.chunk.content for r in results]


def test_expanded_results_are_source_chunks_scored_per_hop(town):
    results = graph(beam_width=1, max_hops=2).retrieve("north", collection=town, top_k=3)
    assert _texts(results) == [PARAGRAPHS[0], PARAGRAPHS[1], PARAGRAPHS[2]]
    assert [round(r.score, 6) for r in results] == [1.0, 0.8, 0.64]
    hop1, hop2 = results[1].metadata, results[2].metadata
    assert hop1["graph_hop"] == 1 and hop2["graph_hop"] == 2
    assert hop1["graph_triple"] | {"id": None} == {
        "id": None,
        "subject": "Bob",
        "predicate": "owns",
        "object": "Carol Corp",
        "confidence": 0.9,
    }
    assert hop1["graph_source_entity"] == "bob" and hop2["graph_source_entity"] == "bob"
    assert hop2["graph_path"] == ["bob", "carol corp", "dave"]
    assert "graph_hop" not in results[0].metadata


def test_beam_width_follows_the_most_confident_triples_of_each_entity(town):
    narrow = _texts(graph(beam_width=1, max_hops=1).retrieve("north", collection=town, top_k=9))
    wide = _texts(graph(beam_width=3, max_hops=1).retrieve("north", collection=town, top_k=9))
    # beam 1: Bob follows only "owns" (0.9); Alice's one triple leads back to the seed.
    assert set(narrow[1:]) >= {PARAGRAPHS[1]} and PARAGRAPHS[3] not in narrow
    assert {PARAGRAPHS[1], PARAGRAPHS[3], PARAGRAPHS[4]} <= set(wide)
    assert PARAGRAPHS[2] not in wide  # two hops away


def test_max_hops_bounds_the_walk(town):
    texts = _texts(graph(beam_width=3, max_hops=3).retrieve("north", collection=town, top_k=9))
    assert PARAGRAPHS[5] in texts  # Bob -> Carol Corp -> Dave -> Eve: three hops
    texts = _texts(graph(beam_width=3, max_hops=2).retrieve("north", collection=town, top_k=9))
    assert PARAGRAPHS[5] not in texts


def test_a_chunk_the_base_found_is_not_repeated(town):
    results = graph(beam_width=3, max_hops=3).retrieve("north east", collection=town, top_k=9)
    ids = [r.chunk_id for r in results]
    assert len(ids) == len(set(ids))
    base_ids = {
        r.chunk_id
        for r in search("north east", collection=town, retriever="strict", scope=Scope.ALL)
    }
    for result in results:
        if result.chunk_id in base_ids:
            assert "graph_hop" not in result.metadata


def test_filters_apply_to_expanded_chunks(town):
    results = graph(beam_width=3, max_hops=2).retrieve(
        "north", collection=town, top_k=9, filters={"documents": ["p0", "p2"]}
    )
    assert _texts(results) == [PARAGRAPHS[0], PARAGRAPHS[2]]


def test_the_walk_is_one_recursive_query_in_postgresql(town):
    with CaptureQueriesContext(connection) as queries:
        graph(beam_width=2, max_hops=2).retrieve("north", collection=town, top_k=5)
    sql = [q["sql"] for q in queries.captured_queries]
    assert sum("WITH RECURSIVE" in s for s in sql) == 1
    # No query reads the collection's triples wholesale.
    triple_reads = [s for s in sql if "retrieval_triple" in s and "WITH RECURSIVE" not in s]
    assert all(" IN (" in s or "= ANY" in s for s in triple_reads)


def test_graph_is_configured_by_default_and_searchable_from_the_command(town, capsys):
    call_command("retrieval_search", "north", collection="town", retriever="graph", json=True)
    results = json.loads(capsys.readouterr().out)["results"]
    assert results[0]["text"] == PARAGRAPHS[0]
    expanded = [r for r in results if "graph_hop" in r["metadata"]]
    assert expanded and expanded[0]["metadata"]["graph_triple"]["predicate"] == "owns"


def test_a_graph_retriever_cannot_wrap_itself(town):
    town.default_retriever = "graph"
    with pytest.raises(RetrievalError, match="another graph retriever"):
        search("north", collection=town, retriever="graph", scope=Scope.ALL)


@pytest.mark.parametrize(
    "options", [{"beam_width": 0}, {"max_hops": -1}, {"hop_decay": 1.5}, {"min_confidence": 2}]
)
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError):
        GraphRetriever(**options)


def test_merge_keeps_room_for_expansions_under_compressed_scores():
    base = [ScoredChunk(i, 1 / (61 + i)) for i in range(5)]  # reciprocal ranks
    expanded = [ScoredChunk(10 + i, 0.8 / (61 + i), {"graph_hop": 1}) for i in range(3)]
    pure = merge(base, expanded, top_k=5, min_expanded=0)
    assert [s.chunk_id for s in pure] == [0, 1, 2, 3, 4]
    mixed = merge(base, expanded, top_k=5, min_expanded=2)
    assert [s.chunk_id for s in mixed] == [0, 1, 2, 10, 11]  # the two weakest base hits gave way
    assert [s.score for s in mixed] == sorted((s.score for s in mixed), reverse=True)
    assert [s.chunk_id for s in merge(base, expanded, top_k=1, min_expanded=2)] == [0]
    assert len(merge(base, [], top_k=5, min_expanded=2)) == 5
