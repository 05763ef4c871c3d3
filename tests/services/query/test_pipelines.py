"""Named pipelines: rewrite → retrievers → fusion → rerank, configured by settings alone."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from retrieval.exceptions import InvalidComponentError
from retrieval.services.core.fusion import rrf_fuse
from retrieval.services.core.tracing import traced
from retrieval.services.query.pipelines import Pipeline
from retrieval.services.registry import retrievers
from retrieval.services.rewriters.base import BaseQueryRewriter, Rewrite
from retrieval.services.types import ScoredChunk
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db
LENGTH = {
    "BACKEND": "retrieval.services.rerankers.score.ScoreReranker",
    "OPTIONS": {"function": "tests.services.query.test_pipelines.shortest_first"},
}


def shortest_first(query: str, text: str) -> float:
    return -len(text)


@pytest.fixture
def collection(keyword_settings):
    return collection_of(
        "birds",
        {
            "a": "Penguins swim in cold seas and eat krill all year.",
            "b": "Penguins waddle.",
            "c": "Parrots talk and penguins listen.",
            "d": "Eagles soar.",
        },
    )


def test_the_default_pipeline_is_the_collections_retriever(collection):
    results = Pipeline.configured("default").run("penguins", collection=collection, top_k=2)
    direct = retrievers["hybrid"].retrieve("penguins", collection=collection, top_k=2)
    assert [r.chunk_id for r in results] == [r.chunk_id for r in direct]


def test_a_hybrid_in_a_pipeline_runs_its_legs_in_the_pipelines_one_runner(
    collection, retrieval_settings
):
    with traced() as trace:
        results = Pipeline.configured("default").run("penguins", collection=collection, top_k=3)
    (event,) = [e for e in trace.events if e["stage"] == "pipeline"]
    # The fused retrievers' own lists, timed by the one runner (a nested runner showed the
    # hybrid's fused list alone, as one leg).
    assert set(event["leg_ms"]) == set(event["candidates"]) == {"bm25", "dense"}
    assert event["retrievers"] == ["hybrid"] and event["fused_lists"] == 2
    assert [r.chunk_id for r in results] == [
        r.chunk_id
        for r in retrievers["hybrid"].retrieve("penguins", collection=collection, top_k=3)
    ]
    # Two rewritten queries, each through the hybrid: four lists in the one runner, fused
    # per query as the hybrid fuses, then across the queries as the pipeline fuses.
    retrieval_settings(
        REWRITERS={"halves": {"BACKEND": "tests.services.query.test_pipelines.Halves"}},
        PIPELINES={
            "two": {
                "rewriter": "halves",
                "retrievers": ["hybrid"],
                "fusion": "rrf",
                "document_floor": 0,
            }
        },
    )
    with traced() as trace:
        both = Pipeline.configured("two").run("penguins krill", collection=collection, top_k=3)
    (event,) = [e for e in trace.events if e["stage"] == "pipeline"]
    assert set(event["leg_ms"]) == {f"hybrid:q{n}/{leg}" for n in (0, 1) for leg in LEGS}
    hybrid = retrievers["hybrid"]
    each = [hybrid.retrieve(q, collection=collection, top_k=50) for q in ("penguins", "krill")]
    expected = rrf_fuse(
        [[ScoredChunk(r.chunk_id, r.score) for r in results] for results in each], [1.0, 1.0],
        top_k=3, k=60,
    )  # fmt: skip
    assert [r.chunk_id for r in both] == [s.chunk_id for s in expected]


LEGS = ("bm25", "dense")


class Halves(BaseQueryRewriter):
    """Search each word of the query on its own (two words: two queries)."""

    def _rewrite(self, query, *, collection, history):
        return Rewrite(original=query, queries=tuple(query.split()), method="halves")


def test_every_step_runs_and_is_traced(collection, retrieval_settings):
    retrieval_settings(
        RERANKERS={"shortest": LENGTH},
        PIPELINES={
            "full": {
                "rewriter": "prf",
                "retrievers": {"bm25": 1.0, "dense": 0.5},
                "fusion": "relative_score",
                "reranker": "shortest",
                "candidates": 3,
            }
        },
    )
    with traced() as trace:
        results = Pipeline.configured("full").run("penguins", collection=collection, top_k=2)
    retrieval_settings(
        PIPELINES={
            "unranked": {
                "rewriter": "prf",
                "retrievers": {"bm25": 1.0, "dense": 0.5},
                "fusion": "relative_score",
                "candidates": 3,
            }
        }
    )
    candidates = Pipeline.configured("unranked").run("penguins", collection=collection, top_k=3)
    shortest = sorted(candidates, key=lambda r: (len(r.chunk.content), r.rank))[:2]
    assert [r.chunk_id for r in results] == [r.chunk_id for r in shortest]
    assert all("original_score" in r.metadata for r in results)
    stages = [e["stage"] for e in trace.events]
    assert stages == ["rewrite", "rerank", "pipeline"]
    pipeline_event = trace.events[-1]
    assert pipeline_event["retrievers"] == ["bm25", "dense"] and pipeline_event["fused_lists"] == 2
    assert set(results[0].metadata["legs"]) <= {"bm25", "dense"}


def test_unknown_names_fail_at_call_time_and_as_system_checks(collection, retrieval_settings):
    with pytest.raises(InvalidComponentError, match="Unknown pipeline 'nope'; configured: default"):
        Pipeline.configured("nope")
    retrieval_settings(
        PIPELINES={"bad": {"retrievers": ["psychic"], "reranker": "ghost"}, "odd": {"colour": 1}},
        DEFAULT_PIPELINE="missing",
    )
    with pytest.raises(InvalidComponentError, match="unknown keys colour"):
        Pipeline.configured("odd")
    with pytest.raises(SystemCheckError) as error:
        call_command("check")
    message = str(error.value)
    assert "Pipeline 'bad' uses 'psychic'" in message and "uses 'ghost'" in message
    assert "retrieval.E008" in message and "'DEFAULT_PIPELINE'] is 'missing'" in message


def test_bad_steps_are_value_errors():
    with pytest.raises(ValueError, match="Unknown fusion 'max'"):
        Pipeline(fusion="max")
    with pytest.raises(ValueError, match="candidates"):
        Pipeline(candidates=0)
    with pytest.raises(ValueError, match="at least one retriever"):
        Pipeline(retrievers={})


def test_fusion_defaults_live_in_one_setting(retrieval_settings):
    """A hybrid retriever defaulted to relative score and a pipeline to RRF: two places."""
    from retrieval.services.retrievers.hybrid import HybridRetriever

    assert (HybridRetriever().method, Pipeline().fusion) == ("relative_score", "relative_score")
    retrieval_settings(FUSION={"method": "rrf", "k": 20})
    assert (HybridRetriever().method, HybridRetriever().k) == ("rrf", 20)
    assert (Pipeline().fusion, Pipeline().k) == ("rrf", 20)
    assert Pipeline(fusion="dbsf", k=5).fusion == "dbsf"
    retrieval_settings(FUSION={"method": "max"})
    with pytest.raises(ValueError, match="Unknown fusion 'max'"):
        Pipeline()


def test_the_document_floor_defaults_to_the_fusion_setting(retrieval_settings):
    from retrieval.services.retrievers.hybrid import HybridRetriever

    assert (HybridRetriever().document_floor, Pipeline().document_floor) == (0.8, 0.8)
    # A FUSION that leaves a key out has the app's default for it, not a second default.
    retrieval_settings(FUSION={"method": "rrf"})
    assert (HybridRetriever().k, HybridRetriever().document_floor, Pipeline().k) == (60, 0.8, 60)
    retrieval_settings(FUSION={"method": "relative_score", "k": 60, "document_floor": 0.5})
    assert (HybridRetriever().document_floor, Pipeline().document_floor) == (0.5, 0.5)
    assert Pipeline(document_floor=0).document_floor == 0.0
    retrieval_settings(PIPELINES={"paged": {"document_floor": 0.9}})
    assert Pipeline.configured("paged").document_floor == 0.9
    retrieval_settings(FUSION={"method": "relative_score", "document_floor": 2})
    for make in (Pipeline, HybridRetriever):
        with pytest.raises(ValueError, match="document_floor must be a number from 0 to 1"):
            make()
