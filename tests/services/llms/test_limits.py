"""Budgets and cut answers over real HTTP: a hung server, retries inside the deadline,
the schema message counted, answers cut at max_tokens, raw control characters."""

from __future__ import annotations

import pytest

from retrieval.exceptions import BudgetExceeded, LLMError
from retrieval.services.llms.openai import OpenAIChatLLM
from retrieval.services.query.tracing import Budget, traced
from retrieval.services.registry import llms
from retrieval.services.rewriters.llm import HyDEQueryRewriter, LLMQueryRewriter
from tests.conftest import collection_of
from tests.openai_server import hang_fault, status_fault, truncated

SCORE = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["score"],
}
ASK = [{"role": "user", "content": "How sure are you?"}]
PATH = "/v1/chat/completions"


def llm(server, **options):
    return OpenAIChatLLM(model="m", base_url=server.base_url, cache=None, **options)


def test_a_hung_server_gets_one_request_within_the_time_budget(llm_server):
    llm_server.fail_next(*[hang_fault()] * 3, path=PATH)
    with traced(Budget(max_seconds=0.4)) as trace:
        with pytest.raises(LLMError, match="timed out after 0.4 s"):
            llm(llm_server, max_retries=2, timeout=20).complete(ASK)
    assert len(llm_server.requests_to(PATH)) == 1  # no retry past the deadline
    assert trace.llm_calls[0].attempts == 1


def test_the_timeout_bounds_the_whole_call_retries_included(llm_server):
    llm_server.fail_next(*[hang_fault()] * 3, path=PATH)
    with pytest.raises(LLMError, match="timed out after 0.3 s"):
        llm(llm_server, max_retries=2, timeout=0.3).complete(ASK)
    assert len(llm_server.requests_to(PATH)) == 1


def test_retries_are_counted_and_stop_when_the_pause_would_pass_the_deadline(llm_server):
    llm_server.fail_next(status_fault(429), status_fault(503), path=PATH)
    llm_server.queue_chat("third time")
    with traced() as trace:
        assert llm(llm_server, max_retries=2).complete(ASK).text == "third time"
    assert trace.llm_calls[0].attempts == 3
    llm_server.reset()
    llm_server.fail_next(status_fault(503, retry_after_ms=5000), path=PATH)
    with traced() as trace:
        with pytest.raises(LLMError, match="1 attempt"):
            llm(llm_server, max_retries=2, timeout=1).complete(ASK)
    assert len(llm_server.requests_to(PATH)) == 1
    assert trace.llm_calls[0].attempts == 1 and trace.llm_calls[0].error


def test_the_token_estimate_counts_the_schema_message(llm_server):
    # the user message alone fits 40 tokens; with the schema's system message it does not
    with traced(Budget(max_tokens=40)):
        with pytest.raises(BudgetExceeded, match="tokens"):
            llm(llm_server).complete_json(ASK, schema=SCORE, purpose="judge")
    assert llm_server.requests_to(PATH) == []


def test_a_cut_answer_is_not_sent_back_for_repair(llm_server):
    llm_server.queue_chat(truncated('{"score": 0.'))
    with pytest.raises(LLMError, match="cut at max_tokens"):
        llms["default"].complete_json(ASK, schema=SCORE, purpose="judge")
    assert len(llm_server.requests_to(PATH)) == 1
    llm_server.queue_chat(truncated("partial"))
    answer = llm(llm_server).complete(ASK)
    assert answer.truncated and answer.finish_reason == "length"


def test_raw_control_characters_in_json_strings_are_accepted(llm_server):
    schema = {**SCORE, "properties": {**SCORE["properties"], "reason": {"type": "string"}}}
    llm_server.queue_chat('{"score": 0.5, "reason": "line one\nline two\tend"}')
    data = llms["default"].complete_json(ASK, schema=schema, purpose="judge")
    assert data == {"score": 0.5, "reason": "line one\nline two\tend"}
    assert len(llm_server.requests_to(PATH)) == 1  # no repair needed


@pytest.mark.django_db
def test_a_rewrite_cut_by_the_budget_is_a_fallback(llm_server, keyword_settings):
    collection = collection_of("travel", {"a": "Paris tower iron lattice."})
    llm_server.queue_chat(truncated("The tower"))
    rewrite = HyDEQueryRewriter().rewrite("How tall?", collection=collection)
    assert rewrite.fallback and rewrite.queries == ("How tall?",)
    assert "cut at max_tokens" in rewrite.reason
    llm_server.queue_chat(truncated("How tall is"))
    rewrite = LLMQueryRewriter().rewrite("How tall?", collection=collection)
    assert rewrite.fallback and rewrite.queries == ("How tall?",)
