"""The triple extractor suite: one list of facts per text, in order, within bounds."""

from __future__ import annotations

from typing import ClassVar

import pytest

from retrieval.services.extractors.base import BaseTripleExtractor, ExtractedTriple
from retrieval.testing.base import Suite

__all__ = ["ExtractorSuite"]


class ExtractorSuite(Suite):
    """The ``BaseTripleExtractor`` contract. Define :meth:`make_extractor`."""

    TEXTS: ClassVar[list[str]] = [
        "Marie Curie discovered polonium in Paris.",
        "",
        "The Eiffel Tower stands in Paris. Gustave Eiffel designed it.",
    ]

    def make_extractor(self, request: pytest.FixtureRequest) -> BaseTripleExtractor:
        raise NotImplementedError("Return the extractor under test.")

    @pytest.fixture
    def extractor(self, request: pytest.FixtureRequest) -> BaseTripleExtractor:
        return self.make_extractor(request)

    def test_one_list_of_triples_per_text_in_order(self, extractor) -> None:
        found = extractor.extract(self.TEXTS)
        assert len(found) == len(self.TEXTS)
        assert found[1] == []  # an empty text holds no fact
        for triples in found:
            for triple in triples:
                assert isinstance(triple, ExtractedTriple)
                assert triple.subject.strip() and triple.predicate.strip()
                assert triple.object.strip()
                assert 0.0 <= triple.confidence <= 1.0

    def test_no_texts_no_triples(self, extractor) -> None:
        assert extractor.extract([]) == []

    def test_it_names_its_output_for_the_cache(self, extractor) -> None:
        assert extractor.cache_key and len(extractor.cache_key) <= 100
        assert extractor.batch_size >= 1

    def test_check_returns_a_list(self, extractor) -> None:
        assert isinstance(extractor.check(), list)
