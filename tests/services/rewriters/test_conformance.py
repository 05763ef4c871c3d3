"""Every rewriter of the app through the public suite (retrieval.testing.rewriters); the LLM
ones against the scripted OpenAI-compatible server, which echoes a prompt it was not
scripted for (a bad answer the rewriters must survive)."""

from __future__ import annotations

from retrieval.services.rewriters.llm import (
    DecompositionRewriter,
    HyDEQueryRewriter,
    LLMQueryRewriter,
    MultiQueryRewriter,
)
from retrieval.services.rewriters.prf import RM3QueryRewriter
from retrieval.testing.rewriters import RewriterSuite


class TestRM3QueryRewriter(RewriterSuite):
    def make_rewriter(self, request):
        return RM3QueryRewriter()


def _llm(cls):
    def make_rewriter(self, request):
        request.getfixturevalue("llm_server")
        return cls()

    return type(f"Test{cls.__name__}", (RewriterSuite,), {"make_rewriter": make_rewriter})


TestLLMQueryRewriter = _llm(LLMQueryRewriter)
TestMultiQueryRewriter = _llm(MultiQueryRewriter)
TestHyDEQueryRewriter = _llm(HyDEQueryRewriter)
TestDecompositionRewriter = _llm(DecompositionRewriter)
