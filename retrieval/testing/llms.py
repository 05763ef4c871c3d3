"""The language-model suite: answers within the query's budget, recorded in its trace.

Run it against a server the test controls: :meth:`LLMSuite.script` queues the next
answers (the app's tests use a scripted OpenAI-compatible server on localhost).
"""

from __future__ import annotations

import pytest

from retrieval.exceptions import BudgetExceeded, LLMError
from retrieval.services.core.tracing import Budget, traced
from retrieval.services.llms.base import BaseLLM, LLMAnswer
from retrieval.testing.base import Suite

__all__ = ["LLMSuite"]

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 20}},
    "required": ["answer"],
}


class LLMSuite(Suite):
    """The ``BaseLLM`` contract. Define :meth:`make_llm` and :meth:`script`."""

    def make_llm(self, request: pytest.FixtureRequest) -> BaseLLM:
        raise NotImplementedError("Return the LLM under test (its cache off or cleared).")

    def script(self, request: pytest.FixtureRequest, *answers: str) -> None:
        raise NotImplementedError("Make the server answer the next calls with these texts.")

    @pytest.fixture
    def llm(self, request: pytest.FixtureRequest) -> BaseLLM:
        return self.make_llm(request)

    def test_a_text_answer_is_recorded_and_charged(self, request, llm) -> None:
        self.script(request, "North is up.")
        with traced(Budget(max_calls=5, max_tokens=4000)) as trace:
            answer = llm.complete([{"role": "user", "content": "Where is north?"}], purpose="t")
        assert isinstance(answer, LLMAnswer) and answer.text == "North is up."
        (call,) = trace.llm_calls
        assert call.purpose == "t" and not call.error
        assert trace.budget.calls == 1 and trace.budget.tokens >= 0

    def test_a_json_answer_is_validated_and_repaired_once(self, request, llm) -> None:
        self.script(request, "not json", '{"answer": "north"}')
        data = llm.complete_json([{"role": "user", "content": "Which way?"}], schema=SCHEMA)
        assert data == {"answer": "north"}
        self.script(request, "no", "still no")
        with pytest.raises(LLMError, match="after one repair"):
            llm.complete_json([{"role": "user", "content": "Which way now?"}], schema=SCHEMA)

    def test_nothing_is_sent_past_the_budget(self, request, llm) -> None:
        self.script(request, "unused")
        with traced(Budget(max_calls=1)) as trace:
            trace.budget.charge(0)  # the one call is spent
            with pytest.raises(BudgetExceeded):
                llm.complete([{"role": "user", "content": "Anything?"}])
        assert trace.llm_calls == []

    def test_check_returns_a_list(self, llm) -> None:
        assert isinstance(llm.check(), list)
