"""Triple extractors through the public suite (retrieval.testing.extractors)."""

from __future__ import annotations

import pytest

from retrieval.services.extractors.syntactic import SpacyTripleExtractor
from retrieval.testing.extractors import ExtractorSuite
from tests.support.extractors import SentenceExtractor


@pytest.fixture(scope="module")
def spacy_extractor() -> SpacyTripleExtractor:
    return SpacyTripleExtractor()


class TestSpacyTripleExtractor(ExtractorSuite):
    def make_extractor(self, request):
        return request.getfixturevalue("spacy_extractor")

    def test_it_finds_the_facts_of_a_plain_sentence(self, extractor) -> None:
        (triples,) = extractor.extract(["Marie Curie discovered polonium."])
        assert ("Marie Curie", "polonium") in {(t.subject, t.object) for t in triples}


class TestSentenceExtractor(ExtractorSuite):
    """The tests' own extractor ("Subject verb Object (confidence).")."""

    def make_extractor(self, request):
        return SentenceExtractor()
