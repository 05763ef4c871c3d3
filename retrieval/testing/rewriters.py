"""The query rewriter suite: queries to search, never an exception for a model's answer."""

from __future__ import annotations

from typing import ClassVar

import pytest

from retrieval.services.core.tracing import traced
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.rewriters.base import BaseQueryRewriter, Rewrite
from retrieval.testing.base import KEYWORD_EMBEDDER, Suite, configure

__all__ = ["RewriterSuite"]


class RewriterSuite(Suite):
    """The ``BaseQueryRewriter`` contract. Define :meth:`make_rewriter` (a fixture may back
    it, e.g. a scripted LLM server)."""

    pytestmark = pytest.mark.django_db
    TEXTS: ClassVar[dict[str, str]] = {
        "a": "Reset a forgotten password from the sign-in page.",
        "b": "Delete an account in the privacy settings.",
        "c": "Passwords expire after ninety days.",
    }
    QUERY = "how do I reset my password"

    def make_rewriter(self, request: pytest.FixtureRequest) -> BaseQueryRewriter:
        raise NotImplementedError("Return the rewriter under test.")

    @pytest.fixture
    def rewriter(self, request: pytest.FixtureRequest) -> BaseQueryRewriter:
        return self.make_rewriter(request)

    @pytest.fixture
    def collection(self, settings):
        configure(settings, EMBEDDERS={"default": KEYWORD_EMBEDDER})
        collection, _ = get_or_create_collection("rewriter-suite")
        ingest(collection, [Source.from_text(t, external_id=k) for k, t in self.TEXTS.items()])
        return collection

    def check(self, rewrite: Rewrite, query: str) -> None:
        assert isinstance(rewrite, Rewrite) and rewrite.original == query
        assert rewrite.queries and all(isinstance(q, str) and q.strip() for q in rewrite.queries)
        assert len(set(rewrite.queries)) == len(rewrite.queries)
        assert rewrite.method and (rewrite.reason or not rewrite.fallback)
        assert isinstance(rewrite.standalone, str) and rewrite.asked.strip()

    def test_it_gives_queries_to_search(self, rewriter, collection) -> None:
        self.check(rewriter.rewrite(self.QUERY, collection=collection), self.QUERY)

    def test_history_as_strings_or_turns(self, rewriter, collection) -> None:
        turns = [{"role": "user", "content": "I use the mobile app."}, "and the website"]
        self.check(rewriter.rewrite(self.QUERY, collection=collection, history=turns), self.QUERY)
        with pytest.raises(ValueError, match="history"):
            rewriter.rewrite(self.QUERY, collection=collection, history="not a list")

    def test_context_is_accepted(self, rewriter, collection) -> None:
        rewrite = rewriter.rewrite(self.QUERY, collection=collection, context="a bank's site")
        self.check(rewrite, self.QUERY)

    def test_a_traced_rewrite_is_recorded(self, rewriter, collection) -> None:
        with traced() as trace:
            rewriter.rewrite(self.QUERY, collection=collection)
        assert [e["stage"] for e in trace.events].count("rewrite") == 1

    def test_check_returns_a_list(self, rewriter) -> None:
        assert isinstance(rewriter.check(), list)
