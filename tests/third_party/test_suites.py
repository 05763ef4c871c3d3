"""The app's public conformance suites run on components written outside it."""

from __future__ import annotations

from retrieval.testing.indexes import IndexSuite
from retrieval.testing.rerankers import RerankerSuite
from tests.third_party.components import WordOverlapReranker


class TestMemoryIndex(IndexSuite):
    backend = "tests.third_party.components.MemoryIndex"
    options = {"prefix": "memory"}


class TestWordOverlapReranker(RerankerSuite):
    def make_reranker(self, request):
        return WordOverlapReranker()
