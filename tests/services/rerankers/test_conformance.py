"""Every reranker of the app through the public suite (retrieval.testing.rerankers)."""

from __future__ import annotations

from retrieval.services.rerankers.cross_encoder import CrossEncoderReranker
from retrieval.services.rerankers.llm import LLMReranker
from retrieval.services.rerankers.score import ScoreReranker
from retrieval.testing.rerankers import RerankerSuite
from tests.services.rerankers.test_rerankers import TEXTS, build_cross_encoder


def shared_words(query: str, text: str) -> float:
    return len(set(query.lower().split()) & set(text.lower().strip(".").split()))


class TestScoreReranker(RerankerSuite):
    def make_reranker(self, request):
        return ScoreReranker(function=shared_words)


class TestCrossEncoderReranker(RerankerSuite):
    """A tiny ONNX cross-encoder built for the suite's texts (no download)."""

    def make_reranker(self, request):
        folder = request.getfixturevalue("tmp_path")
        build_cross_encoder(folder)
        return CrossEncoderReranker(model_dir=folder, batch_size=2)


class TestLLMReranker(RerankerSuite):
    """Against the scripted OpenAI-compatible server, which answers a ranking per call."""

    def make_reranker(self, request):
        server = request.getfixturevalue("llm_server")
        server.queue_chat(*['{"ranking": [2, 1]}'] * 10)
        return LLMReranker()


assert set(RerankerSuite.TEXTS.values()) == set(TEXTS.values())  # the model's vocabulary
