"""Fixtures of the answer tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def sample_handbook(keyword_settings, retrieval_settings, sample_docs):
    """Return a function indexing sample documents (file names) into collection "handbook",
    in chunks of up to 200 tokens as ``dev.py demo`` would read them."""
    retrieval_settings(
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                "OPTIONS": {"max_tokens": 200},
            }
        }
    )
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import Source, ingest

    def index(*names: str):
        collection, _ = get_or_create_collection("handbook")
        ingest(collection, [Source.from_path(sample_docs / n, external_id=n) for n in names])
        return collection

    return index
