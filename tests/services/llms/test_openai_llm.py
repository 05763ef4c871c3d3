"""The OpenAI-compatible chat LLM over real HTTP: JSON validation and repair, retries,
timeouts, caching, and the per-query budget."""

from __future__ import annotations

import json

import pytest

from retrieval.exceptions import BudgetExceeded, InvalidComponentError, LLMError
from retrieval.services.core.tracing import Budget, traced
from retrieval.services.llms.answers import ANSWER_CHARS
from retrieval.services.llms.openai import OpenAIChatLLM
from retrieval.services.registry import llms
from tests.support.openai_server import delay_fault, error_reply, malformed_json_fault, status_fault

SCORE = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
    "required": ["score"],
}
ASK = [{"role": "user", "content": "How sure are you?"}]
PATH = "/v1/chat/completions"


def test_text_answer_records_tokens_and_time_in_the_trace(llm_server):
    llm_server.queue_chat("forty two")
    with traced() as trace:
        answer = llms["default"].complete(ASK, purpose="test")
    assert answer.text == "forty two" and answer.completion_tokens == 2
    (call,) = trace.llm_calls
    assert call.model == "test-chat" and call.purpose == "test" and call.ms > 0
    assert call.prompt_tokens == 4 and call.total_tokens == 6 and not call.cached
    assert trace.budget.calls == 1 and trace.budget.tokens == 6
    sent = llm_server.requests_to(PATH)[0].body
    assert sent["model"] == "test-chat" and sent["messages"] == ASK and sent["temperature"] == 0


def test_identical_calls_are_answered_from_the_cache(llm_server):
    llm_server.queue_chat("first", "second")
    llm = llms["default"]
    assert llm.complete(ASK).text == "first"
    with traced() as trace:
        again = llm.complete(ASK)
    assert again.text == "first" and again.cached
    assert trace.llm_calls[0].cached and trace.budget.calls == 0  # a cached answer is free
    assert len(llm_server.requests_to(PATH)) == 1
    other = llm.complete([{"role": "user", "content": "Something else?"}])
    assert other.text == "second"  # another prompt is another key


def test_valid_json_is_parsed_and_the_schema_is_in_the_request(llm_server):
    llm_server.queue_chat('```json\n{"score": 0.25}\n```')
    assert llms["default"].complete_json(ASK, schema=SCORE) == {"score": 0.25}
    body = llm_server.requests_to(PATH)[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert json.dumps(SCORE) in body["messages"][0]["content"]


@pytest.mark.parametrize(
    "bad, problem",
    [("not json at all", "not JSON"), ('{"score": 1.7}', "1.7 is greater than the maximum")],
)
def test_an_invalid_answer_gets_one_repair_request(llm_server, bad, problem):
    llm_server.queue_chat(bad, '{"score": 0.5}')
    with traced() as trace:
        assert llms["default"].complete_json(ASK, schema=SCORE, purpose="judge") == {"score": 0.5}
    repair = llm_server.requests_to(PATH)[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": bad}
    assert problem in repair[-1]["content"]
    assert [c.purpose for c in trace.llm_calls] == ["judge", "judge (repair)"]


def test_a_second_invalid_answer_is_a_clear_error(llm_server):
    llm_server.queue_chat('{"verdict": "yes"}', '{"score": -1}')
    with pytest.raises(LLMError, match="no valid JSON for judge after one repair: .*-1"):
        llms["default"].complete_json(ASK, schema=SCORE, purpose="judge")


def test_rate_limits_and_server_errors_are_retried_then_reported(llm_server):
    llm_server.fail_next(status_fault(429), status_fault(503), path=PATH)
    llm_server.queue_chat("after retries")
    llm = OpenAIChatLLM(model="m", base_url=llm_server.base_url, max_retries=2, cache=None)
    assert llm.complete(ASK).text == "after retries"
    assert len(llm_server.requests_to(PATH)) == 3
    llm_server.fail_next(*[status_fault(500)] * 3, path=PATH)
    with pytest.raises(LLMError, match=r"failed \(max_retries=2\)"):
        llm.complete(ASK)


def test_a_malformed_body_and_a_timeout_are_llm_errors(llm_server):
    llm = OpenAIChatLLM(model="m", base_url=llm_server.base_url, max_retries=0, cache=None)
    llm_server.fail_next(malformed_json_fault(), path=PATH)
    with pytest.raises(LLMError):
        llm.complete(ASK)
    slow = OpenAIChatLLM(
        model="m", base_url=llm_server.base_url, max_retries=0, timeout=0.3, cache=None
    )
    llm_server.fail_next(delay_fault(3), path=PATH)
    with pytest.raises(LLMError, match="timed out"):
        slow.complete(ASK)


def test_the_budget_caps_calls_tokens_and_seconds(llm_server):
    llm = OpenAIChatLLM(model="m", base_url=llm_server.base_url, cache=None)
    with traced(Budget(max_calls=1)):
        llm.complete(ASK)
        with pytest.raises(BudgetExceeded, match="1 of 1 calls"):
            llm.complete(ASK)
    assert len(llm_server.requests_to(PATH)) == 1
    with traced(Budget(max_tokens=3)):  # the prompt alone needs more: nothing is sent
        with pytest.raises(BudgetExceeded, match="tokens"):
            llm.complete(ASK)
    assert len(llm_server.requests_to(PATH)) == 1
    with traced(Budget(max_tokens=40)):
        llm.complete(ASK)
    assert llm_server.requests_to(PATH)[-1].body["max_tokens"] < 40  # the answer must fit
    slow = OpenAIChatLLM(model="m", base_url=llm_server.base_url, max_retries=0, cache=None)
    llm_server.fail_next(delay_fault(3), path=PATH)
    with traced(Budget(max_seconds=0.3)) as trace:
        # Cut by what is left of the budget's 0.3 s when the request goes (not the LLM's own
        # timeout, nor the server's 3 s): on a loaded machine that can be 0.2 s.
        with pytest.raises(LLMError, match=r"timed out after 0\.[1-3] s"):
            slow.complete(ASK)
    assert trace.llm_calls[0].error


def test_short_form_and_bad_configuration(retrieval_settings):
    retrieval_settings(LLMS={"fast": "openai:gpt-4o-mini", "odd": "anthropic:claude"})
    llm = llms["fast"]
    assert isinstance(llm, OpenAIChatLLM) and llm.model == "gpt-4o-mini"
    with pytest.raises(InvalidComponentError, match="PROVIDER one of openai"):
        llms["odd"]
    with pytest.raises(ValueError, match="json_mode must be one of"):
        OpenAIChatLLM(model="m", json_mode="xml")


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("json_schema", "json_schema"),
        ("llama_cpp", "json_object"),
        ("none", None),
    ],
)
def test_json_modes_shape_the_request(llm_server, mode, expected):
    llm_server.queue_chat('{"score": 1}')
    llm = OpenAIChatLLM(model="m", base_url=llm_server.base_url, json_mode=mode, cache=None)
    assert llm.complete_json(ASK, schema=SCORE) == {"score": 1}
    body = llm_server.requests_to(PATH)[0].body
    assert (body.get("response_format") or {}).get("type") == expected
    if mode == "llama_cpp":
        assert body["response_format"]["schema"] == SCORE


def test_invalid_json_answers_are_not_cached(llm_server):
    llm_server.queue_chat("not json", '{"score": 0.5}', '{"score": 0.25}')
    llm = llms["default"]
    assert llm.complete_json(ASK, schema=SCORE) == {"score": 0.5}  # after a repair
    assert llm.complete_json(ASK, schema=SCORE) == {"score": 0.25}  # asked again, not "not json"
    assert llm.complete_json(ASK, schema=SCORE) == {"score": 0.25}  # a valid answer is cached
    assert len(llm_server.requests_to(PATH)) == 3


def test_answers_are_validated_as_written_and_cleaned_after(llm_server):
    # A string of NUL characters is schema-valid; cleaned to "" it must not cost a repair.
    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}}
    llm_server.queue_chat('{"name": "\\u0000\\ud800"}')
    assert llms["default"].complete_json(ASK, schema=schema) == {"name": "\ufffd"}
    llm_server.queue_chat('{"name": "\\u0000"}')
    assert llms["default"].complete_json([*ASK, ASK[0]], schema=schema) == {"name": ""}
    assert len(llm_server.requests_to(PATH)) == 2


def test_a_servers_oversized_error_is_cut_in_the_error_and_the_trace(llm_server):
    # A 400 whose message echoes 200,000 characters (a prompt, an answer).
    llm_server.fail_next(lambda request, server: error_reply(400, "z" * 200_000), path=PATH)
    llm = OpenAIChatLLM(model="m", base_url=llm_server.base_url, max_retries=0, cache=None)
    with traced() as trace, pytest.raises(LLMError) as failed:
        llm.complete(ASK)
    assert "z" * 100 in str(failed.value) and len(str(failed.value)) < ANSWER_CHARS + 300
    (call,) = trace.llm_calls
    assert len(call.error) < ANSWER_CHARS + 300
