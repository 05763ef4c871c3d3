"""The agentic loop under a budget, over real HTTP: it ends with what it has, and the
rounds add up to the trace (the retry's rewrite included)."""

from __future__ import annotations

import json

import pytest

from retrieval.services.access import Scope
from retrieval.services.agentic.pipeline import AgenticRetrievalPipeline
from retrieval.services.agentic.stages import LLMEvaluator, LLMSelector
from retrieval.services.core.tracing import Budget, traced
from retrieval.services.query.search import search
from retrieval.services.registry import retrievers
from retrieval.services.rewriters.llm import LLMQueryRewriter
from retrieval.services.tools import retrieve_tool
from tests.conftest import collection_of
from tests.support.openai_server import hang_fault

pytestmark = pytest.mark.django_db
PATH = "/v1/chat/completions"


@pytest.fixture
def collection(keyword_settings):
    return collection_of(
        "zoo",
        {
            "penguins": "Penguins live on ice.",
            "camels": "Camels cross deserts.",
            "krill": "Penguins eat krill.",
        },
    )


def llm_pipeline(**options):
    defaults = dict(
        retriever=retrievers["bm25"],
        selector=LLMSelector(),
        evaluator=LLMEvaluator(),
        max_rounds=3,
        top_k=2,
        max_top_k=3,
        selected_chunk_limit=2,
    )
    return AgenticRetrievalPipeline(**{**defaults, **options})


def test_a_tiny_token_budget_still_returns_what_was_retrieved(llm_server, collection):
    with traced(Budget(max_tokens=5)):  # search joins this trace: no LLM call fits
        results = search(
            "penguins", collection=collection, retriever="agentic", top_k=2, scope=Scope.ALL
        )
    assert results, "the loop must end with what it has"
    assert {r.chunk.document.external_id for r in results} <= {"penguins", "krill"}
    (round_,) = [e for e in results.trace["events"] if e["stage"] == "agentic_round"]
    assert "tokens" in round_["stopped"]
    assert round_["candidates"] == [r.chunk_id for r in results]
    assert llm_server.requests_to(PATH) == []


def test_a_round_stopped_after_selection_records_its_candidates(llm_server, collection):
    llm_server.queue_chat(json.dumps({"selected": [1]}))
    with traced(Budget(max_calls=1)):
        outcome = llm_pipeline().run("penguins", collection=collection)
    (round_,) = outcome.rounds
    assert "1 of 1 calls" in round_["stopped"] and len(round_["candidates"]) == 2
    assert round_["selected"] == [round_["candidates"][1]]
    assert [r.chunk_id for r in outcome.results] == round_["selected"]


def test_a_round_stopped_before_selection_returns_the_top_candidates(llm_server, collection):
    with traced(Budget(max_tokens=5)):
        outcome = llm_pipeline().run("penguins", collection=collection)
    (round_,) = outcome.rounds
    assert round_["candidates"] and round_["selected"] == round_["candidates"][:2]
    assert [r.chunk_id for r in outcome.results] == round_["selected"]


def test_the_rounds_add_up_to_the_trace(llm_server, collection):
    llm_server.queue_chat(
        json.dumps({"selected": [0]}),
        json.dumps({"score": 0.1, "reason": "no diet"}),
        "what penguins eat",  # the retry's rewrite
        json.dumps({"selected": [0]}),
        json.dumps({"score": 0.9}),
    )
    loop = llm_pipeline(rewriter=LLMQueryRewriter())
    with traced() as trace:
        outcome = loop.run("penguins food", collection=collection)
    assert len(outcome.rounds) == 2 and outcome.sufficient
    assert outcome.rounds[0]["next_query"] == outcome.rounds[1]["query"] == "what penguins eat"
    assert [r["llm_calls"] for r in outcome.rounds] == [3, 2]
    assert sum(r["llm_calls"] for r in outcome.rounds) == len(trace.llm_calls) == 5
    assert sum(r["tokens"] for r in outcome.rounds) == sum(c.total_tokens for c in trace.llm_calls)


def test_the_retrieve_tool_runs_inside_the_budget(llm_server, collection, retrieval_settings):
    retrieval_settings(LLM_BUDGET={"max_calls": 1, "max_tokens": None, "max_seconds": None})
    llm_server.fail_next(*[hang_fault()] * 6, path=PATH)
    retrieval_settings(
        LLMS={
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": {"model": "m", "base_url": llm_server.base_url, "timeout": 0.3},
            }
        }
    )
    tool = retrieve_tool("agentic", collection=collection, scope=Scope.ALL)
    answer = json.loads(tool.execute({"query": "penguins", "top_k": 2}))
    assert answer["results"], answer  # the retriever's candidates, despite the hung LLM
    assert len(llm_server.requests_to(PATH)) == 1  # max_calls=1 holds for the tool too


def test_a_budget_stop_in_the_retry_rewrite_ends_the_loop_in_that_round(llm_server, collection):
    # Issue 37: the rewriter turned BudgetExceeded into a fallback to the original query, so
    # with 2 calls the loop used both, then searched a second round and recorded the stop there.
    llm_server.queue_chat(
        json.dumps({"selected": [0]}), json.dumps({"score": 0.1, "reason": "no diet"})
    )
    with traced(Budget(max_calls=2)):
        outcome = llm_pipeline(rewriter=LLMQueryRewriter()).run(
            "penguins food", collection=collection
        )
    (round_,) = outcome.rounds
    assert "2 of 2 calls" in round_["stopped"] and "next_query" not in round_
    assert round_["llm_calls"] == 2 and len(llm_server.requests_to(PATH)) == 2
    assert [r.chunk_id for r in outcome.results] == round_["selected"]
