"""Fixtures for the admin screens: uploads stored in a temporary media folder."""

from __future__ import annotations

import pytest

from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def atlas(keyword_settings):
    """A collection of two small text documents, indexed with the keyword embedder."""
    collection, _ = get_or_create_collection("atlas")
    ingest(
        collection,
        [
            Source.from_text(
                "North is up, where the river runs.\n\nEast is right, where the sun rises.",
                external_id="map.txt",
                metadata={"lang": "en"},
            ),
            Source.from_text(
                "Up the hill we go.", external_id="hill.txt", metadata={"lang": "de", "year": 2020}
            ),
        ],
    )
    return collection
