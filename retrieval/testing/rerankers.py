"""The reranker suite: a reranker reorders the candidates it is given, and only them."""

from __future__ import annotations

from typing import ClassVar

import pytest

from retrieval.services.access import Scope
from retrieval.services.core.tracing import traced
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult
from retrieval.testing.base import KEYWORD_EMBEDDER, Suite, configure

__all__ = ["RerankerSuite"]


class RerankerSuite(Suite):
    """The ``BaseReranker`` contract. Define :meth:`make_reranker` (a fixture may back it)."""

    pytestmark = pytest.mark.django_db
    TEXTS: ClassVar[dict[str, str]] = {
        "a": "Penguins slide on ice.",
        "b": "Volcanoes erupt lava.",
        "c": "Penguins eat fish.",
        "d": "Ice covers the pole.",
        "e": "Deserts are dry.",
    }
    QUERY = "penguins on the ice"

    def make_reranker(self, request: pytest.FixtureRequest) -> BaseReranker:
        raise NotImplementedError("Return the reranker under test.")

    @pytest.fixture
    def reranker(self, request: pytest.FixtureRequest) -> BaseReranker:
        return self.make_reranker(request)

    @pytest.fixture
    def candidates(self, settings) -> list[RetrievalResult]:
        """Five results of a real search (BM25), as a pipeline hands them over."""
        configure(settings, EMBEDDERS={"default": KEYWORD_EMBEDDER})
        collection, _ = get_or_create_collection("rerank-suite")
        ingest(collection, [Source.from_text(t, external_id=k) for k, t in self.TEXTS.items()])
        words = "penguins ice volcanoes deserts pole fish"
        found = list(
            search(words, collection=collection, top_k=5, retriever="bm25", scope=Scope.ALL)
        )
        assert len(found) == 5
        return found

    def test_it_reorders_exactly_the_candidates(self, reranker, candidates) -> None:
        reranked = reranker.rerank(self.QUERY, candidates)
        assert sorted(r.chunk_id for r in reranked) == sorted(r.chunk_id for r in candidates)
        assert [r.rank for r in reranked] == list(range(len(candidates)))
        scores = [r.score for r in reranked]
        assert scores == sorted(scores, reverse=True)
        before = {r.chunk_id: r for r in candidates}
        for result in reranked:
            assert result.metadata["original_score"] == before[result.chunk_id].score
            assert result.metadata["original_rank"] == before[result.chunk_id].rank

    def test_top_k_keeps_the_best(self, reranker, candidates) -> None:
        everything = reranker.rerank(self.QUERY, candidates)
        best = reranker.rerank(self.QUERY, candidates, top_k=2)
        assert [r.chunk_id for r in best] == [r.chunk_id for r in everything[:2]]

    def test_the_same_candidates_give_the_same_order(self, reranker, candidates) -> None:
        first = [r.chunk_id for r in reranker.rerank(self.QUERY, candidates)]
        assert [r.chunk_id for r in reranker.rerank(self.QUERY, candidates)] == first

    def test_no_candidates_no_results(self, reranker) -> None:
        assert reranker.rerank(self.QUERY, []) == []

    @pytest.mark.parametrize("top_k", [0, -1, 2.5, "3"])
    def test_a_bad_top_k_is_refused(self, reranker, candidates, top_k) -> None:
        with pytest.raises(ValueError, match="top_k"):
            reranker.rerank(self.QUERY, candidates, top_k=top_k)

    def test_a_traced_rerank_is_recorded(self, reranker, candidates) -> None:
        with traced() as trace:
            reranker.rerank(self.QUERY, candidates)
        events = [e for e in trace.to_dict()["events"] if e["stage"] == "rerank"]
        assert len(events) == 1 and events[0]["candidates"] == len(candidates)

    def test_check_returns_a_list(self, reranker) -> None:
        assert isinstance(reranker.check(), list)
