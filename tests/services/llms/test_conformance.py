"""The OpenAI-compatible LLM through the public suite (retrieval.testing.llms), against the
scripted OpenAI-compatible server."""

from __future__ import annotations

from retrieval.services.llms.openai import OpenAIChatLLM
from retrieval.testing.llms import LLMSuite


class TestOpenAIChatLLM(LLMSuite):
    def make_llm(self, request):
        server = request.getfixturevalue("llm_server")
        return OpenAIChatLLM(model="test-chat", base_url=server.base_url, cache=None)

    def script(self, request, *answers):
        request.getfixturevalue("llm_server").queue_chat(*answers)
