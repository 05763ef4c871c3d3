"""Hybrid retrieval: fused legs, per-leg explanations, failing legs, concurrent legs."""

from __future__ import annotations

import threading

import pytest

from retrieval.exceptions import RetrievalError
from retrieval.services.collections import get_or_create_collection
from retrieval.services.fusion import rrf_fuse
from retrieval.services.indexing import Source, ingest
from retrieval.services.registry import retrievers
from retrieval.services.retrievers.hybrid import HybridRetriever
from retrieval.services.scope import Scope
from retrieval.services.search import search

TEXTS = {
    "a": "North winds blow over the pole.",
    "b": "East of the river the road goes up.",
    "c": "The compass needle points north and never east.",
    "d": "Up the mountain, north face, a climb.",
}
BROKEN = {"BACKEND": "tests.retrievers.BrokenRetriever"}


@pytest.fixture
def compass(keyword_settings, retrieval_settings):
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    collection, _ = get_or_create_collection("compass")
    ingest(collection, [Source.from_text(text, external_id=key) for key, text in TEXTS.items()])
    return collection


@pytest.mark.django_db
def test_default_hybrid_is_rrf_of_bm25_and_dense(compass):
    query = "north needle"
    fused = search(
        query, collection=compass, top_k=4, scope=Scope.ALL
    )  # the default retriever is "hybrid"
    bm25 = retrievers["bm25"].rank(query, collection=compass, top_k=100)
    dense = retrievers["dense"].rank(query, collection=compass, top_k=100)
    expected = rrf_fuse([bm25, dense], [1.0, 1.0], k=60, top_k=4, names=["bm25", "dense"])
    assert [r.chunk.pk for r in fused] == [r.chunk_id for r in expected]
    assert [r.score for r in fused] == pytest.approx([r.score for r in expected])
    legs = {r.chunk.document.external_id: r.metadata["legs"] for r in fused}
    assert legs["c"]["bm25"]["rank"] == 1  # the only text with "needle" (and "north")
    assert legs["a"]["dense"] == {"score": pytest.approx(1.0), "rank": 1}  # exactly "north"
    assert set(legs["c"]) == {"bm25", "dense"}


@pytest.mark.django_db
def test_a_failing_leg_is_marked_and_the_others_answer(compass, retrieval_settings):
    retrieval_settings(RETRIEVERS={"broken": BROKEN})
    hybrid = HybridRetriever(retrievers={"bm25": 1.0, "broken": 1.0})
    results = hybrid.retrieve("north", collection=compass, top_k=3)
    assert results and all(
        r.metadata["failed_legs"] == {"broken": "RetrievalError: backend is down"} for r in results
    )
    assert all(set(r.metadata["legs"]) == {"bm25"} for r in results)


@pytest.mark.django_db
def test_all_legs_failing_raises(compass, retrieval_settings):
    retrieval_settings(RETRIEVERS={"broken": BROKEN, "also-broken": BROKEN})
    with pytest.raises(
        RetrievalError, match="Every retriever of the hybrid failed: broken: .*also-broken"
    ):
        HybridRetriever(retrievers=["broken", "also-broken"]).retrieve("north", collection=compass)


@pytest.mark.django_db
def test_legs_prepare_on_worker_threads_and_query_on_the_callers_connection(compass):
    threads: dict[str, str] = {}
    dense, bm25 = retrievers["dense"], retrievers["bm25"]
    prepare, rank_prepared = dense.prepare, bm25.rank_prepared

    def recording_prepare(*args, **kwargs):
        threads["dense.prepare"] = threading.current_thread().name
        return prepare(*args, **kwargs)

    def recording_rank(*args, **kwargs):
        threads["bm25.rank"] = threading.current_thread().name
        return rank_prepared(*args, **kwargs)

    dense.prepare, bm25.rank_prepared = recording_prepare, recording_rank
    try:
        # Inside this test's transaction: the legs must see its uncommitted chunks.
        fused = HybridRetriever(retrievers={"bm25": 1.0, "dense": 1.0}).retrieve(
            "north", collection=compass, top_k=4
        )
    finally:
        del dense.prepare, bm25.rank_prepared
    assert threads["dense.prepare"].startswith("retrieval-leg")
    assert threads["bm25.rank"] == threading.current_thread().name
    expected = rrf_fuse(
        [
            retrievers["bm25"].rank("north", collection=compass, top_k=100),
            retrievers["dense"].rank("north", collection=compass, top_k=100),
        ],
        top_k=4,
    )
    assert [r.chunk.pk for r in fused] == [r.chunk_id for r in expected]


def test_bad_options_and_checks(retrieval_settings):
    with pytest.raises(ValueError, match="Unknown fusion method 'max'"):
        HybridRetriever(method="max")
    with pytest.raises(ValueError, match="at least one"):
        HybridRetriever(retrievers={})
    with pytest.raises(ValueError, match="non-negative"):
        HybridRetriever(retrievers={"bm25": -1})
    retrieval_settings(
        RETRIEVERS={
            "loop": {
                "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
                "OPTIONS": {"retrievers": ["loop", "ghost"]},
            }
        }
    )
    messages = [m.msg for m in retrievers["loop"].check()]
    assert messages == [
        "Hybrid retriever 'loop' fuses 'loop', which is itself.",
        "Hybrid retriever 'loop' fuses 'ghost', which is not in RETRIEVERS.",
    ]
