"""One fusion path: Pipeline and HybridRetriever run legs concurrently, tolerate a failing
leg, and fuse the same inputs into the same order."""

from __future__ import annotations

import pytest

from retrieval.exceptions import InvalidFilterError, RetrievalError
from retrieval.services.core.tracing import traced
from retrieval.services.query.pipelines import Pipeline
from retrieval.services.retrievers.hybrid import HybridRetriever
from tests.conftest import collection_of
from tests.support.retrievers import RendezvousRetriever

pytestmark = pytest.mark.django_db
TEXTS = {
    "a": "North winds blow over the pole.",
    "b": "East of the river the road goes up.",
    "c": "The compass needle points north and never east.",
    "d": "Up the mountain, north face, a climb.",
    "e": "East and north meet at the needle's tip.",
}
TEST_RETRIEVERS = {
    "meet-a": {"BACKEND": "tests.support.retrievers.RendezvousRetriever"},
    "meet-b": {"BACKEND": "tests.support.retrievers.RendezvousRetriever"},
    "broken": {"BACKEND": "tests.support.retrievers.BrokenRetriever"},
    "also-broken": {"BACKEND": "tests.support.retrievers.BrokenRetriever"},
    "unfilterable": {"BACKEND": "tests.support.retrievers.UnfilterableRetriever"},
}


@pytest.fixture
def compass(keyword_settings, retrieval_settings):
    retrieval_settings(RETRIEVERS=TEST_RETRIEVERS)
    RendezvousRetriever.meet()
    return collection_of("compass", TEXTS)


def through(path: str, legs, collection, **options):
    """Rank ``north`` with ``legs`` through a pipeline or a hybrid retriever."""
    top_k = options.pop("top_k", 3)
    if path == "pipeline":
        pipeline = Pipeline(name="p", retrievers=legs, **options)
        return pipeline.run("north", collection=collection, top_k=top_k)
    options = {{"fusion": "method"}.get(key, key): value for key, value in options.items()}
    return HybridRetriever(**options, retrievers=legs).retrieve(
        "north", collection=collection, top_k=top_k
    )


@pytest.mark.parametrize("path", ["pipeline", "hybrid"])
def test_legs_are_prepared_concurrently(compass, path):
    # Each leg waits at a two-party barrier while preparing: run one after the other,
    # the first would wait alone and break it, failing both legs.
    results = through(path, ["meet-a", "meet-b"], compass)
    assert results and all("failed_legs" not in r.metadata for r in results)
    assert all(set(r.metadata["legs"]) == {"meet-a", "meet-b"} for r in results)
    threads = sorted(name for _, name, _ in RendezvousRetriever.seen)
    # The caller prepares one costly leg itself, a worker the other.
    assert len(threads) == 2 and threads[0] == "MainThread"
    assert threads[1].startswith("retrieval-leg")


@pytest.mark.parametrize("path", ["pipeline", "hybrid"])
def test_a_failing_leg_is_recorded_and_the_others_answer(compass, path):
    with traced() as trace:
        results = through(path, {"bm25": 1.0, "broken": 1.0}, compass)
    failed = {"broken": "RetrievalError: backend is down"}
    assert results and all(r.metadata["failed_legs"] == failed for r in results)
    assert all(set(r.metadata["legs"]) == {"bm25"} for r in results)
    events = [e for e in trace.events if e["stage"] == "failed_legs"]
    assert [e["failed"] for e in events] == [failed]
    if path == "pipeline":
        assert trace.events[-1]["stage"] == "pipeline"
        assert trace.events[-1]["failed_legs"] == failed


@pytest.mark.parametrize(("path", "label"), [("pipeline", "pipeline 'p'"), ("hybrid", "hybrid")])
def test_every_leg_failing_raises(compass, path, label):
    with pytest.raises(RetrievalError, match=f"Every retriever of the {label} failed: broken: "):
        through(path, ["broken", "also-broken"], compass)


def test_a_single_legs_own_error_is_raised_unchanged(compass):
    with pytest.raises(RetrievalError, match="^backend is down$"):
        through("pipeline", ["broken"], compass)


@pytest.mark.parametrize("path", ["pipeline", "hybrid"])
def test_a_filter_a_leg_cannot_express_is_raised_not_dropped(compass, path):
    with pytest.raises(InvalidFilterError, match="cannot filter on metadata.colour"):
        through(path, ["bm25", "unfilterable"], compass)


@pytest.mark.parametrize("method", ["rrf", "relative_score", "relative_to_best", "dbsf"])
def test_both_paths_fuse_the_same_inputs_into_the_same_order(compass, method):
    legs = {"bm25": 1.0, "dense": 0.5}
    options = {"fusion": method, "k": 5, "candidates": 4, "top_k": 4}
    piped = through("pipeline", legs, compass, **options)
    hybrid = through("hybrid", legs, compass, **options)
    assert len(piped) == 4
    assert [r.chunk_id for r in piped] == [r.chunk_id for r in hybrid]
    assert [r.score for r in piped] == [r.score for r in hybrid]
    assert [r.metadata["legs"] for r in piped] == [r.metadata["legs"] for r in hybrid]
    # Not the bm25 order alone: both legs shaped the fused order.
    assert {name for r in piped for name in r.metadata["legs"]} == {"bm25", "dense"}
