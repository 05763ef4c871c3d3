"""Prompts of passages fit the model's context window (issue 60, finding 12).

The scripted server counts tokens through a chat template and answers 400 to a prompt
longer than its context, as llama-cpp-python does: an agentic search with multi-query
and an LLM rerank sent 4,783 tokens to a server with 2,048, and the search fell back.
"""

from __future__ import annotations

import json

import pytest

from retrieval.exceptions import LLMError
from retrieval.services.access import Scope
from retrieval.services.agentic.stages import LLMEvaluator, LLMSelector
from retrieval.services.core.tracing import traced
from retrieval.services.llms.fitting import fit_passages, numbered
from retrieval.services.llms.openai import OpenAIChatLLM
from retrieval.services.query.search import search
from retrieval.services.registry import retrievers
from retrieval.services.rerankers.llm import LLMReranker
from tests.conftest import collection_of
from tests.services.llms.schemas import longest, schema_of
from tests.services.llms.test_limits import smollm_tokens
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db
PATH = "/v1/chat/completions"
WINDOW = 2048
WORDS = "krill ice colony chick moult feather sea dive egg huddle".split()


def answer(request) -> str:
    """The longest answer the request's schema allows (ids past the passages are ignored);
    a rewrite gets a short query."""
    schema = schema_of(request)
    return "penguin diet" if schema is None else json.dumps(longest(schema, char="a"))


@pytest.fixture
def server(keyword_settings, retrieval_settings):
    """A 2,048-token server as the ``default`` LLM, and 30 documents of ~600 characters."""
    with OpenAIServer(
        models=("m",),
        tokens=smollm_tokens,
        template_tokens=26,
        message_tokens=5,
        context_window=WINDOW,
    ) as server:
        options = {"model": "m", "base_url": server.base_url, "cache": None}
        retrieval_settings(
            LLMS={
                "default": {
                    "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                    "OPTIONS": {**options, "json_mode": "llama_cpp", "context_window": WINDOW},
                }
            },
            CHUNKERS={
                "default": {
                    "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                    "OPTIONS": {"max_tokens": 400, "min_tokens": 1},
                }
            },
            REWRITERS={"multi": {"BACKEND": "retrieval.services.rewriters.llm.MultiQueryRewriter"}},
            RERANKERS={"llm": {"BACKEND": "retrieval.services.rerankers.llm.LLMReranker"}},
        )
        texts = {
            f"d{i}": f"Penguins note {i}: "
            + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(100))
            for i in range(30)
        }
        server.collection = collection_of("colony", texts)
        yield server


def candidates(server, k: int = 30):
    return retrievers["bm25"].retrieve("penguins", collection=server.collection, top_k=k)


def fit_events(trace, purpose: str) -> list[dict]:
    return [e for e in trace.events if e["stage"] == "fit" and e["purpose"] == purpose]


def test_the_selector_drops_the_candidates_past_the_window_and_says_so(server):
    found = candidates(server)
    server.queue_chat(answer)
    with traced() as trace:
        selection = LLMSelector().select("What do penguins eat?", found, limit=3)
    assert not selection.reason.startswith("model failed"), selection.reason
    (request,) = server.requests_to(PATH)
    (event,) = fit_events(trace, "select")
    assert event["context_window"] == WINDOW and event["passages"] == len(found) == 30
    assert 0 < event["shown"] < 30 and event["dropped"] == 30 - event["shown"]
    prompt = request.body["messages"][-1]["content"]
    assert f"[{event['shown'] - 1}] " in prompt and f"[{event['shown']}] " not in prompt
    (call,) = trace.llm_calls
    assert not call.error and call.prompt_tokens + request.body["max_tokens"] <= WINDOW


def test_the_listwise_reranker_shows_what_fits_and_keeps_the_rest_in_order(server):
    found = candidates(server, k=20)
    server.queue_chat(answer)
    with traced() as trace:
        reranked = LLMReranker(max_passages=20, passage_chars=800).rerank("penguins", found)
    (event,) = fit_events(trace, "rerank")
    assert 0 < event["shown"] < 20
    (call,) = trace.llm_calls
    assert not call.error
    assert sorted(r.chunk_id for r in reranked) == sorted(r.chunk_id for r in found)
    unshown = [r.chunk_id for r in found[event["shown"] :]]
    assert [r.chunk_id for r in reranked][-len(unshown) :] == unshown  # previous order


def test_a_prompt_that_fits_is_sent_whole_and_not_traced(server):
    found = candidates(server, k=3)
    server.queue_chat(answer)
    with traced() as trace:
        LLMEvaluator().evaluate("What do penguins eat?", found)
    assert not fit_events(trace, "evaluate") and not trace.llm_calls[0].error
    assert "[2] " in server.requests_to(PATH)[0].body["messages"][-1]["content"]


def test_one_passage_longer_than_the_window_is_cut_and_a_question_too_long_fails(server):
    llm = OpenAIChatLLM(model="m", base_url=server.base_url, context_window=800, cache=None)

    def build(passages):
        return [{"role": "user", "content": f"Q?\n{numbered(passages)}"}], None

    with traced() as trace:
        fitted = fit_passages(llm, ["penguin " * 2000, "krill"], build, purpose="test")
    assert fitted.shown == 1 and 0 < fitted.cut_to < 16_000
    assert llm.overrun(fitted.messages) <= 0 < llm.overrun(build(["penguin " * 2000])[0])
    assert fit_events(trace, "test")[0]["cut_to_chars"] == fitted.cut_to

    def too_long(passages):
        return [{"role": "user", "content": "why " * 1000 + numbered(passages)}], None

    with pytest.raises(LLMError, match="context window of 800 tokens"):
        fit_passages(llm, ["krill"], too_long, purpose="test")


def test_an_agentic_search_with_multi_query_and_rerank_stays_within_the_window(server):
    server.queue_chat(*[answer] * 40)
    results = search(
        "What do penguins eat?",
        collection=server.collection,
        scope=Scope.ALL,
        retriever="agentic",
        rewriter="multi",
        reranker="llm",
        top_k=20,
    )
    calls = results.trace["llm_calls"]
    assert calls and not [c["error"] for c in calls if c["error"]]
    fitted = {e["purpose"] for e in results.trace["events"] if e["stage"] == "fit"}
    assert fitted >= {"select", "rerank"}


def test_a_context_window_too_small_to_hold_a_prompt_is_refused_at_configuration():
    with pytest.raises(ValueError, match="context_window must be None or at least 256"):
        OpenAIChatLLM(model="m", base_url="http://127.0.0.1:1/v1", context_window=100)
    assert OpenAIChatLLM(model="m", base_url="http://127.0.0.1:1/v1").context_window == 8192
