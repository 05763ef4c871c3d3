"""Batch queries on an index that batches (Milvus, Chroma): one embedding call and one
engine request for the whole batch, the same answers as one search at a time."""

from __future__ import annotations

import pytest

from retrieval.services.access import Scope
from retrieval.services.indexes.chroma import ChromaIndex
from retrieval.services.indexes.milvus import MilvusIndex
from retrieval.services.query.search import search, search_batch
from retrieval.testing import KeywordEmbedder
from retrieval.testing.indexes import make_collection
from tests.services.indexes.conftest import EXTERNAL, engine_for

QUERIES = ["north", "east", "up", "north east", "north up", "west"]


class Counting:
    """Counts the engine requests of searches (each a list of query vectors)."""

    requests: list[int] = []

    def _search_many(self, name, collection_id, vectors, limit, filters, hints):
        Counting.requests.append(len(vectors))
        return super()._search_many(name, collection_id, vectors, limit, filters, hints)


class CountingMilvusIndex(Counting, MilvusIndex):
    pass


class CountingChromaIndex(Counting, ChromaIndex):
    pass


class CountingEmbedder(KeywordEmbedder):
    """Counts embedder calls."""

    calls: list[int] = []

    def embed_batch(self, texts):
        CountingEmbedder.calls.append(len(texts))
        return super().embed_batch(texts)


@pytest.fixture(params=EXTERNAL)
def counted(request, engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, request.param, tmp_path_factory)
    backend = "CountingChromaIndex" if request.param == "chroma" else "CountingMilvusIndex"
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": f"{__name__}.{backend}", "OPTIONS": engine.options}},
        EMBEDDERS={
            "default": {
                "BACKEND": f"{__name__}.CountingEmbedder",
                "OPTIONS": {"keywords": ["north", "east", "up"]},
            }
        },
    )
    Counting.requests.clear()
    CountingEmbedder.calls.clear()
    return engine


def answers(results) -> list[tuple[int, float]]:
    return [(r.chunk_id, r.score) for r in results]


@pytest.mark.django_db
def test_a_dense_batch_is_one_embedding_call_and_one_engine_request(counted):
    collection = make_collection("compass", "ext")
    CountingEmbedder.calls.clear()
    before = counted.search_requests() if counted.kind == "milvus-server" else None
    batch = search_batch(QUERIES, collection=collection, retriever="dense", scope=Scope.ALL)
    assert Counting.requests == [len(QUERIES)]
    assert CountingEmbedder.calls == [len(QUERIES)]
    if before is not None:  # the server's own count: one search request of six vectors
        requests, vectors = counted.search_requests()
        assert (requests - before[0], vectors - before[1]) == (1, len(QUERIES))
    event = next(e for e in batch[0].trace["events"] if e["stage"] == "pipeline")
    assert event["batched"] and event["queries"] == QUERIES

    Counting.requests.clear()
    alone = [search(q, collection=collection, retriever="dense", scope=Scope.ALL) for q in QUERIES]
    assert Counting.requests == [1] * len(QUERIES)
    assert [answers(b) for b in batch] == [answers(a) for a in alone]
    assert [answers(b) for b in batch][0][0][1] == 1.0  # "north" itself


@pytest.mark.django_db
def test_filters_top_k_and_other_pipelines_in_a_batch(counted):
    collection = make_collection("compass", "ext")
    options = {"collection": collection, "scope": Scope.ALL, "top_k": 2}
    flat = {"metadata": {"group": "flat"}}
    batch = search_batch(QUERIES, retriever="dense", filters=flat, **options)
    assert Counting.requests == [len(QUERIES)]
    alone = [search(q, retriever="dense", filters=flat, **options) for q in QUERIES]
    assert [answers(b) for b in batch] == [answers(a) for a in alone]
    assert all(len(b) <= 2 for b in batch)
    # A hybrid pipeline (BM25 beside dense) is not one dense leg: searched one by one.
    Counting.requests.clear()
    hybrid = search_batch(QUERIES[:3], retriever="hybrid", max_workers=1, **options)
    assert Counting.requests == [1, 1, 1]
    assert [answers(b) for b in hybrid] == [
        answers(search(q, retriever="hybrid", **options)) for q in QUERIES[:3]
    ]
    with pytest.raises(ValueError, match="top_k"):
        search_batch(QUERIES, retriever="dense", collection=collection, scope=Scope.ALL, top_k=0)
