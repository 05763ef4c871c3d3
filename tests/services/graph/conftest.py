"""A collection whose chunks are paragraphs and whose triples are read off the text."""

from __future__ import annotations

import pytest

from retrieval.services.registry import extractors
from tests.conftest import KEYWORD_EMBEDDER


@pytest.fixture
def graph_settings(retrieval_settings):
    """Keyword embedder, one chunk per paragraph, the sentence extractor as default."""
    retrieval_settings(
        EMBEDDERS={"default": KEYWORD_EMBEDDER},
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.paragraph.ParagraphChunker",
                "OPTIONS": {"max_chars": 50},
            }
        },
        EXTRACTORS={"default": {"BACKEND": "tests.extractors.SentenceExtractor"}},
    )
    return extractors["default"]
