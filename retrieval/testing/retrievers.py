"""The retriever suite: ranked results of one collection, under its filters and scope."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from retrieval.models import Collection, Document
from retrieval.services.core.filters import Filters
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.registry import retrievers
from retrieval.testing.base import KEYWORD_EMBEDDER, Suite, configure

__all__ = ["RetrieverSuite"]

TEXTS = {
    "n": "North is up on the map.",
    "ne": "North east lies between north and east.",
    "e": "East is where the sun rises.",
    "u": "Up is the sky.",
}


class RetrieverSuite(Suite):
    """The ``BaseRetriever`` contract. Set ``backend`` and ``options`` (the retriever is
    configured as the alias "under_test"), or ``alias`` to test a configured one."""

    pytestmark = pytest.mark.django_db
    backend: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}
    alias: ClassVar[str] = "under_test"
    QUERY = "north east"

    @pytest.fixture
    def retriever(self, settings: Any) -> Any:
        overrides: dict[str, Any] = {"EMBEDDERS": {"default": KEYWORD_EMBEDDER}}
        if self.backend:
            config = {"BACKEND": self.backend, "OPTIONS": dict(self.options)}
            overrides["RETRIEVERS"] = {self.alias: config}
        configure(settings, **overrides)
        return retrievers[self.alias]

    @pytest.fixture
    def collection(self, retriever) -> Collection:
        collection, _ = get_or_create_collection("retriever-suite")
        sources = [
            Source.from_text(t, external_id=k, metadata={"axis": k}) for k, t in TEXTS.items()
        ]
        ingest(collection, sources)
        other, _ = get_or_create_collection("elsewhere")
        ingest(other, [Source.from_text("North east, north east.", external_id="n-other")])
        return collection

    def names(self, results) -> list[str]:
        return [r.chunk.document.external_id for r in results]

    def test_results_are_ranked_best_first(self, retriever, collection) -> None:
        results = retriever.retrieve(self.QUERY, collection=collection, top_k=4)
        assert results and len(results) <= 4
        assert [r.rank for r in results] == list(range(len(results)))
        scores = [r.score for r in results]
        assert scores == sorted(scores, reverse=True)
        assert len({r.chunk_id for r in results}) == len(results)

    def test_only_the_collections_chunks_are_found(self, retriever, collection) -> None:
        results = retriever.retrieve(self.QUERY, collection=collection, top_k=10)
        assert {r.chunk.collection_id for r in results} == {collection.pk}
        assert "n-other" not in self.names(results)

    def test_top_k_is_a_limit(self, retriever, collection) -> None:
        assert len(retriever.retrieve(self.QUERY, collection=collection, top_k=1)) == 1

    def test_document_and_metadata_filters_narrow_the_results(self, retriever, collection) -> None:
        only = retriever.retrieve(
            self.QUERY, collection=collection, top_k=10, filters={"documents": ["e", "u"]}
        )
        assert set(self.names(only)) <= {"e", "u"}
        tagged = retriever.retrieve(
            self.QUERY, collection=collection, top_k=10, filters={"metadata": {"axis": "ne"}}
        )
        assert set(self.names(tagged)) <= {"ne"}

    def test_a_document_scope_is_never_left(self, retriever, collection) -> None:
        allowed = Document.objects.filter(collection=collection, external_id__in=["u", "e"])
        scope = Filters(documents_within=allowed)
        results = retriever.retrieve(self.QUERY, collection=collection, top_k=10, filters=scope)
        assert set(self.names(results)) <= {"u", "e"}

    def test_an_empty_collection_finds_nothing(self, retriever) -> None:
        empty, _ = get_or_create_collection("empty-suite")
        assert retriever.retrieve(self.QUERY, collection=empty, top_k=5) == []

    @pytest.mark.parametrize("top_k", [0, -3])
    def test_a_bad_top_k_is_refused(self, retriever, collection, top_k) -> None:
        with pytest.raises(ValueError, match="top_k"):
            retriever.retrieve(self.QUERY, collection=collection, top_k=top_k)
