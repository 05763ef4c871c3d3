"""Streamed chat completions over real HTTP: pieces as the server writes them, under the
same cache, budget and trace as a whole answer, and faults that strike mid-stream."""

from __future__ import annotations

import pytest

from retrieval.exceptions import BudgetExceeded, LLMError
from retrieval.services.core.tracing import Budget, traced
from retrieval.services.llms.openai import OpenAIChatLLM
from retrieval.services.registry import llms
from tests.support.openai_server import status_fault, stream_fault

ASK = [{"role": "user", "content": "Where is north?"}]
PATH = "/v1/chat/completions"


def uncached(server, **options) -> OpenAIChatLLM:
    return OpenAIChatLLM(model="m", base_url=server.base_url, cache=None, **options)


def test_the_answer_streams_in_pieces_and_is_traced_and_charged(llm_server):
    llm_server.queue_chat("North is up on the map.")
    with traced() as trace:
        pieces = list(llms["default"].stream(ASK, purpose="test"))
    assert len(pieces) == 6 and "".join(pieces) == "North is up on the map."
    sent = llm_server.requests_to(PATH)[0].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    (call,) = trace.llm_calls
    assert (call.purpose, call.prompt_tokens, call.completion_tokens) == ("test", 3, 6)
    assert not call.error and trace.budget.calls == 1 and trace.budget.tokens == 9


def test_a_streamed_answer_is_cached_and_served_whole(llm_server):
    llm_server.queue_chat("North is up.", "Something else.")
    assert "".join(llms["default"].stream(ASK)) == "North is up."
    with traced() as trace:
        assert list(llms["default"].stream(ASK)) == ["North is up."]
    assert trace.llm_calls[0].cached and len(llm_server.requests_to(PATH)) == 1


@pytest.mark.parametrize(
    ("then", "message"),
    [("hang", "timed out mid-stream"), ("error", "failed mid-stream"), ("drop", "ended its")],
)
def test_a_fault_mid_stream_is_an_llm_error_after_the_pieces_sent(llm_server, then, message):
    llm_server.queue_chat("North is up on the map.")
    llm_server.fail_next(stream_fault(after=3, then=then), path=PATH)
    llm = uncached(llm_server, timeout=0.5)
    pieces = []
    with traced() as trace, pytest.raises(LLMError, match=message):
        for piece in llm.stream(ASK):
            pieces.append(piece)
    assert "".join(pieces) == "North is "
    assert message.split()[0] in trace.llm_calls[0].error and trace.budget.calls == 1


def test_a_stream_is_retried_until_it_starts_and_kept_within_the_budget(llm_server):
    llm_server.queue_chat("North.")
    llm_server.fail_next(status_fault(503), path=PATH)
    assert list(uncached(llm_server, max_retries=1).stream(ASK)) == ["North."]
    assert len(llm_server.requests_to(PATH)) == 2
    with traced(Budget(max_calls=1)):
        list(uncached(llm_server).stream(ASK))
        with pytest.raises(BudgetExceeded):
            list(uncached(llm_server).stream(ASK))
    llm_server.queue_chat("North is up on the map.")
    llm_server.fail_next(stream_fault(after=2, then="hang"), path=PATH)
    with traced(Budget(max_seconds=0.4)), pytest.raises(LLMError, match="mid-stream"):
        list(uncached(llm_server, timeout=30).stream(ASK))  # the budget's 0.4 s, not 30
