"""The bounded agentic loop: limits, rounds, policies, LLM stages over real HTTP, budget."""

from __future__ import annotations

import json

import pytest

from retrieval.services.access import Scope
from retrieval.services.agentic.pipeline import AgenticRetrievalPipeline, OnInsufficient, build
from retrieval.services.agentic.retriever import AgenticRetriever
from retrieval.services.agentic.stages import (
    CoverageEvaluator,
    CoverageSelector,
    LLMEvaluator,
    LLMSelector,
)
from retrieval.services.core.tracing import Budget, traced
from retrieval.services.query.search import search
from retrieval.services.registry import retrievers, rewriters
from retrieval.services.rewriters.llm import LLMQueryRewriter
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection(keyword_settings):
    return collection_of(
        "zoo",
        {
            "penguins": "Penguins live on ice.",
            "camels": "Camels cross deserts.",
            "owls": "Owls hunt at night.",
            "krill": "Penguins eat krill.",
        },
    )


def pipeline(**options):
    defaults = dict(
        retriever=retrievers["bm25"],
        selector=CoverageSelector(),
        evaluator=CoverageEvaluator(),
        max_rounds=3,
        top_k=1,
        max_top_k=3,
        selected_chunk_limit=2,
    )
    return AgenticRetrievalPipeline(**{**defaults, **options})


def test_invalid_limits_and_wrong_stage_kinds_are_refused():
    for bad in (
        {"max_rounds": 0},
        {"top_k": -1},
        {"selected_chunk_limit": 1.5},
        {"max_top_k": 0},
        {"sufficiency_threshold": 2},
        {"growth": 0.5},
    ):
        with pytest.raises(ValueError):
            pipeline(**bad)
    with pytest.raises(TypeError, match="selector must be a BaseSelector"):
        pipeline(selector=CoverageEvaluator())
    with pytest.raises(TypeError, match="evaluator must be a BaseEvaluator"):
        pipeline(evaluator=lambda q, s: 1.0)
    with pytest.raises(TypeError, match="rewriter"):
        pipeline(rewriter="prf")


def test_a_sufficient_first_round_stops_the_loop(collection):
    with traced() as trace:
        outcome = pipeline().run("penguins ice", collection=collection)
    assert outcome.sufficient and len(outcome.rounds) == 1
    assert [r.chunk.content for r in outcome.results] == ["Penguins live on ice."]
    assert outcome.rounds[0]["verdict"] == 1.0 and "covers 2 of 2" in outcome.rounds[0]["reason"]
    assert [e["stage"] for e in trace.events] == ["agentic_round"]


@pytest.mark.parametrize("policy", [OnInsufficient.BEST_EFFORT, OnInsufficient.EMPTY])
def test_retries_grow_top_k_up_to_the_cap_then_apply_the_policy(collection, policy):
    loop = pipeline(on_insufficient=policy, rewriter=rewriters["prf"])
    outcome = loop.run("penguins unicorns", collection=collection)  # unicorns: never covered
    assert not outcome.sufficient
    assert [r["top_k"] for r in outcome.rounds] == [1, 2, 3]
    assert outcome.rounds[1]["query"].startswith("penguins unicorns ")  # the PRF rewrite
    assert all(len(r["selected"]) <= 2 for r in outcome.rounds)
    assert {r.chunk.document.external_id for r in outcome.retrieved} >= {"penguins", "krill"}
    if policy is OnInsufficient.BEST_EFFORT:
        assert [r.chunk_id for r in outcome.results] == outcome.rounds[-1]["selected"]
    else:
        assert outcome.results == ()


def test_llm_stages_handle_invented_ids_and_out_of_range_scores(llm_server, collection):
    llm_server.queue_chat(
        json.dumps({"selected": [1, 99, 0], "reason": "both penguin facts"}),
        json.dumps({"score": 1.7}),  # out of range: repaired
        json.dumps({"score": 0.9, "reason": "answers it"}),
    )
    loop = pipeline(
        selector=LLMSelector(), evaluator=LLMEvaluator(), top_k=2, selected_chunk_limit=3
    )
    with traced() as trace:
        outcome = loop.run("what do penguins do?", collection=collection)
    assert outcome.sufficient and len(outcome.rounds) == 1
    candidates = outcome.rounds[0]["candidates"]
    assert outcome.rounds[0]["selected"] == [candidates[1], candidates[0]]
    assert outcome.rounds[0]["reason"] == "answers it"
    assert outcome.rounds[0]["llm_calls"] == 3 and outcome.rounds[0]["tokens"] > 0
    assert len(trace.llm_calls) == 3


def test_budget_exhaustion_ends_the_loop_with_the_best_effort(llm_server, collection):
    llm_server.queue_chat(json.dumps({"selected": [0]}))
    loop = pipeline(selector=LLMSelector(), evaluator=LLMEvaluator())
    with traced(Budget(max_calls=1)):
        outcome = loop.run("penguins", collection=collection)
    assert not outcome.sufficient and "1 of 1 calls" in outcome.rounds[0]["stopped"]
    assert len(llm_server.requests_to("/v1/chat/completions")) == 1


def test_agentic_retriever_offline_returns_all_rounds_deduplicated(collection):
    results = search(
        "penguins unicorns", collection=collection, retriever="agentic", top_k=3, scope=Scope.ALL
    )
    rounds = [e for e in results.trace["events"] if e["stage"] == "agentic_round"]
    assert len(rounds) == 3 and results.trace["llm_calls"] == []
    ids = [r.chunk_id for r in results]
    assert len(ids) == len(set(ids)) and len(ids) <= 3
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert any(r.metadata["agentic_selected"] for r in results)
    assert results.trace["events"][1]["stage"] == "rewrite"  # PRF before round 2


def test_agentic_retriever_uses_the_llm_when_one_is_configured(llm_server, collection):
    llm_server.queue_chat(json.dumps({"selected": [0]}), json.dumps({"score": 0.95}))
    results = search(
        "penguins", collection=collection, retriever="agentic", top_k=2, scope=Scope.ALL
    )
    assert [c["purpose"] for c in results.trace["llm_calls"]] == ["select", "evaluate"]
    assert results.trace["budget"]["calls"] == 2


def test_offline_rounds_refine_with_words_of_the_selected_chunks(collection):
    # Issue 33: each retry rewrote the original query the same way, so rounds 2 and 3
    # searched the identical query.
    outcome = pipeline(rewriter=rewriters["prf"]).run("penguins unicorns", collection=collection)
    queries = [r["query"] for r in outcome.rounds]
    assert len(queries) == 3 and len(set(queries)) == 3
    selected = {
        r.chunk_id: r.chunk.content.lower() for r in outcome.retrieved
    }  # words of round 1's selection extend round 2's query
    added = set(queries[1].split()) - set(queries[0].split())
    first_selection = " ".join(selected[i] for i in outcome.rounds[0]["selected"])
    assert added and all(word in first_selection for word in added)


def test_llm_retries_are_told_what_the_rounds_learned_and_never_repeat_a_query(
    llm_server, collection
):
    llm_server.queue_chat(
        json.dumps({"selected": [0]}),
        json.dumps({"score": 0.2, "reason": "nothing about their diet"}),
        "penguins food",  # the model gives back the query already searched
        json.dumps({"selected": [0]}),
        json.dumps({"score": 0.9}),
    )
    loop = pipeline(
        selector=LLMSelector(), evaluator=LLMEvaluator(), rewriter=LLMQueryRewriter(), max_rounds=2
    )
    outcome = loop.run("penguins food", collection=collection)
    first, second = (r["query"] for r in outcome.rounds)
    assert first == "penguins food" and second != first and second.startswith("penguins food ")
    prompt = llm_server.requests_to("/v1/chat/completions")[2].body["messages"][0]["content"]
    assert "Already searched" in prompt and "- penguins food" in prompt
    assert "nothing about their diet" in prompt and "Penguins" in prompt.split("Found so far:")[1]


def test_build_returns_a_configured_pipeline(collection, retrieval_settings):
    offline = build(retriever="bm25", max_rounds=2, on_insufficient="empty", max_top_k=None)
    assert isinstance(offline.selector, CoverageSelector) and offline.rewriter.alias == "prf"
    assert offline.max_rounds == 2 and offline.max_top_k is None
    assert offline.sufficiency_threshold == AgenticRetriever().sufficiency_threshold == 0.7
    assert offline.on_insufficient is OnInsufficient.EMPTY
    outcome = offline.run("penguins unicorns", collection=collection)
    assert not outcome.sufficient and outcome.results == ()
    retrieval_settings(LLMS={"default": "openai:gpt-4o-mini"})
    online = build(retriever="bm25")
    assert isinstance(online.selector, LLMSelector) and isinstance(
        online.rewriter, LLMQueryRewriter
    )


def test_on_insufficient_round_trips_as_a_string_and_max_top_k_may_be_uncapped(
    collection, retrieval_settings
):
    assert json.loads(json.dumps({"on_insufficient": OnInsufficient.BEST_EFFORT})) == {
        "on_insufficient": "best_effort"
    }
    uncapped = pipeline(max_top_k=None, rewriter=rewriters["prf"])
    assert [
        r["top_k"] for r in uncapped.run("penguins unicorns", collection=collection).rounds
    ] == [
        1,
        2,
        4,
    ]
    agentic = "retrieval.services.agentic.retriever.AgenticRetriever"
    options = {"retriever": "bm25", "on_insufficient": "empty", "max_top_k": None}
    retrieval_settings(RETRIEVERS={"strict": {"BACKEND": agentic, "OPTIONS": options}})
    found = search("penguins unicorns", collection=collection, retriever="strict", scope=Scope.ALL)
    assert list(found) == []  # no round was sufficient: "empty" returns nothing
    assert search("penguins ice", collection=collection, retriever="strict", scope=Scope.ALL)
    with pytest.raises(ValueError, match="on_insufficient must be one of 'best_effort', 'empty'"):
        AgenticRetriever(on_insufficient="some")
    with pytest.raises(ValueError, match="on_insufficient must be one of 'best_effort', 'empty'"):
        pipeline(on_insufficient="some")


def test_settings_naming_the_agentic_retrievers_old_path_still_build_it(retrieval_settings):
    old = "retrieval.services.retrievers.agentic.AgenticRetriever"
    retrieval_settings(RETRIEVERS={"rounds": {"BACKEND": old, "OPTIONS": {"retriever": "bm25"}}})
    assert type(retrievers["rounds"]) is AgenticRetriever
