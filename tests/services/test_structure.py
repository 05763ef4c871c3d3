"""Structure on the real database: bare headings lead the text after them."""

from __future__ import annotations

import pytest

from retrieval.models import Document
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexing import Source, ingest

pytestmark = pytest.mark.django_db

GUIDE_MD = b"""# User guide

Welcome to the guide.

## 2. Installation

### Requirements

You need Python 3.11 and PostgreSQL with pgvector.

### Upgrading

Run the migrations after every upgrade.
"""


def md_source(data: bytes, name: str = "guide.md") -> Source:
    return Source(external_id=name, data=data, filename=name, mime_type="text/markdown")


@pytest.fixture
def structured(keyword_settings, retrieval_settings):
    retrieval_settings(
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                "OPTIONS": {"max_tokens": 64, "min_tokens": 0},
            }
        }
    )
    return get_or_create_collection("structured")[0]


def test_a_bare_heading_starts_the_next_chunk_which_takes_the_inner_heading_path(structured):
    ingest(structured, [md_source(GUIDE_MD)])
    chunks = list(Document.objects.get(external_id="guide.md").chunks.order_by("index"))
    document = chunks[0].document
    assert [c.content for c in chunks] == [
        "User guide\n\nWelcome to the guide.",
        "2. Installation\n\nRequirements\n\nYou need Python 3.11 and PostgreSQL with pgvector.",
        "Upgrading\n\nRun the migrations after every upgrade.",
    ]
    assert [c.heading_path for c in chunks] == [
        ["User guide"],
        ["User guide", "2. Installation", "Requirements"],
        ["User guide", "2. Installation", "Upgrading"],
    ]
    assert all(document.content[c.start : c.end] == c.content for c in chunks)


GUIDE_RST = b"""\
==========
User guide
==========

Installation
============

Requirements
------------

You need Python 3.11 and PostgreSQL with pgvector.

Upgrading
---------

Run the migrations after every upgrade.
"""


def test_a_rest_file_is_chunked_by_its_sections(structured, tmp_path):
    path = tmp_path / "guide.rst"
    path.write_bytes(GUIDE_RST)
    run = ingest(structured, [Source.from_path(path, external_id="guide.rst")])
    assert run.status == "succeeded", run.errors
    document = Document.objects.get(external_id="guide.rst")
    assert document.title == "User guide"
    chunks = list(document.chunks.order_by("index"))
    assert [(c.content, c.heading_path) for c in chunks] == [
        (
            "User guide\n\nInstallation\n\nRequirements\n\n"
            "You need Python 3.11 and PostgreSQL with pgvector.",
            ["User guide", "Installation", "Requirements"],
        ),
        (
            "Upgrading\n\nRun the migrations after every upgrade.",
            ["User guide", "Installation", "Upgrading"],
        ),
    ]
