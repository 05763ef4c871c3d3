"""Structure on the real database: bare headings lead the text after them."""

from __future__ import annotations

import pytest

from retrieval.models import Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

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


# --- contextual chunk text ---------------------------------------------------------------

COMPASS_MD = b"""# Compass

## North

The needle points there when you hold the compass flat and away from iron.

Magnetic declination differs from place to place, so maps print the local value.
"""


@pytest.fixture
def compass(keyword_settings, retrieval_settings):
    """Keyword axes north/east/up; chunks of one paragraph each."""
    retrieval_settings(
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                "OPTIONS": {"max_tokens": 24, "min_tokens": 0},
            }
        }
    )

    def indexed(**context):
        if context:
            retrieval_settings(CHUNK_CONTEXT=context.get("value"))
        collection = get_or_create_collection("compass")[0]
        source = md_source(COMPASS_MD, "compass.md")
        source = Source(**{**source.__dict__, "metadata": {"lang": "en", "team": ["nav", "ops"]}})
        run = ingest(collection, [source], force=True)
        assert run.status == "succeeded", run.errors
        return collection, list(Document.objects.get(external_id="compass.md").chunks.all())

    return indexed


def retrieve(alias: str, query: str, collection) -> list[int]:
    from retrieval.services.registry import retrievers

    return [r.chunk.index for r in retrievers[alias].retrieve(query, collection=collection)]


def test_chunks_are_embedded_and_bm25_indexed_with_title_and_headings(compass):
    collection, chunks = compass()
    document = chunks[0].document
    assert [c.content for c in chunks] == [
        "Compass\n\nNorth\n\nThe needle points there when you hold the compass flat and "
        "away from iron.",
        "Magnetic declination differs from place to place, so maps print the local value.",
    ]
    assert all(document.content[c.start : c.end] == c.content for c in chunks)
    # The last line is the file's path as words (compass.md); the second chunk also
    # carries the document's opening sentence, which the first one holds.
    opening = "The needle points there when you hold the compass flat and away from iron."
    assert [c.indexed_prefix for c in chunks] == [
        "Compass\nNorth\ncompass",
        f"Compass\n{opening}\nNorth\ncompass",
    ]
    assert chunks[1].indexed_text == f"Compass\n{opening}\nNorth\ncompass\n\n{chunks[1].content}"
    # "north" is only in the second chunk's header: both legs find it through it.
    assert sorted(retrieve("bm25", "north", collection)) == [0, 1]
    assert sorted(retrieve("dense", "north", collection)[:2]) == [0, 1]
    assert retrieve("bm25", "compass declination", collection)[0] == 1


def test_without_context_only_the_content_is_indexed(compass):
    collection, chunks = compass(value=None)
    assert [c.indexed_prefix for c in chunks] == ["", ""]
    assert chunks[1].indexed_text == chunks[1].content
    assert retrieve("bm25", "north", collection) == [0]
    from retrieval.models import Chunk

    vectors = dict(Chunk.objects.values_list("index", "embedding"))
    assert list(vectors[1]) == pytest.approx([1 / 3**0.5] * 3)  # no keyword: the constant


def test_chosen_metadata_keys_join_the_header(compass):
    _, chunks = compass(
        value={"headings": False, "metadata_keys": ["team", "lang", "missing"], "summary": False}
    )
    assert chunks[1].indexed_prefix == "Compass\nteam: nav, ops\nlang: en\ncompass"


def test_the_summary_line_gives_every_other_chunk_the_documents_opening_sentence(compass):
    from retrieval.services.core.headers import opening_sentence

    collection, chunks = compass()  # "summary": True by default
    # "iron" is only in the first paragraph: BM25 finds the second chunk through its header.
    assert sorted(retrieve("bm25", "iron", collection)) == [0, 1]
    collection, chunks = compass(value={"summary": False})
    assert [c.indexed_prefix for c in chunks] == ["Compass\nNorth\ncompass"] * 2
    assert retrieve("bm25", "iron", collection) == [0]
    # Headings and short lines are not the opening; the sentence stops at its full stop
    # and at SUMMARY_WORDS words.
    text = "Compass\n\nNorth\n\nPoint it north. Then walk.\n\nLater text here, five words."
    assert opening_sentence(text, ["Compass", "North"]) == (
        "Point it north.",
        text.index("Point"),
        text.index("\n\nLater"),
    )
    assert opening_sentence("word " * 40, [])[0] == " ".join(["word"] * 24)
    assert opening_sentence("Compass\n\nShort line.", ["Compass"]) == ("", 0, 0)


def test_the_source_line_names_the_file_a_document_was_read_from(compass, tmp_path):
    from retrieval.services.core.headers import source_line
    from retrieval.services.registry import retrievers

    assert source_line("docs/ref/models/querysets.txt") == "docs ref models querysets"
    assert source_line("docs\\release 3.1.rst") == "docs release 3.1"
    path = tmp_path / "compass.md"
    path.write_bytes(COMPASS_MD)
    collection, chunks = compass(
        value={"title": False, "headings": False, "source": True, "summary": False}
    )
    assert [c.indexed_prefix for c in chunks] == ["compass"] * 2
    ingest(collection, [Source.from_path(path, external_id="field-notes/orienteering.md")])
    document = Document.objects.get(external_id="field-notes/orienteering.md")
    assert {c.indexed_prefix for c in document.chunks.all()} == {"field-notes orienteering"}
    # "orienteering" is only in the header, through the file's path.
    hits = retrievers["bm25"].retrieve("orienteering", collection=collection)
    assert {r.chunk.document.external_id for r in hits} == {"field-notes/orienteering.md"}
    _, chunks = compass(value={"title": True, "headings": True, "source": False, "summary": False})
    assert [c.indexed_prefix for c in chunks] == ["Compass\nNorth"] * 2


def test_a_reindexed_document_keeps_its_source_line(compass, tmp_path):
    from retrieval.models import IndexRun
    from retrieval.services.ingestion.reindexing import reindex_documents

    collection, _ = compass(
        value={"headings": False, "summary": False}
    )  # source: True when left out
    path = tmp_path / "compass.md"
    path.write_bytes(COMPASS_MD)
    ingest(collection, [Source.from_path(path, external_id="guides/compass.md")])
    document = Document.objects.get(external_id="guides/compass.md")
    assert {c.indexed_prefix for c in document.chunks.all()} == {"Compass\nguides compass"}
    path.unlink()  # reindexed from its own content, which keeps its source path
    run = IndexRun.objects.create(collection=collection)
    reindex_documents(collection, [document], run=run, total=1)
    assert {c.indexed_prefix for c in document.chunks.all()} == {"Compass\nguides compass"}


def test_an_opaque_external_id_gives_no_source_line(compass, tmp_path):
    from retrieval.services.core.headers import source_line

    for opaque in ("doc-42", "3f2a9b4c-51d0-4e8e-9b1a-7c1d2e3f4a5b", "release-3.1", "12345"):
        assert source_line(opaque) == ""
    assert source_line("notes.md") == "notes"
    collection, _ = compass(value={"headings": False, "summary": False})
    path = tmp_path / "compass.md"
    path.write_bytes(COMPASS_MD)
    # A file uploaded under an id the site made up: the id names no topic.
    ingest(collection, [Source.from_path(path, external_id="doc-42")])
    document = Document.objects.get(external_id="doc-42")
    assert {c.indexed_prefix for c in document.chunks.all()} == {"Compass"}


def test_a_text_source_has_no_source_line(keyword_settings):
    from retrieval.models import Chunk

    collection = get_or_create_collection("texts")[0]  # the default CHUNK_CONTEXT
    source = Source.from_text("Point north.", external_id="doc-7", title="Compass")
    assert ingest(collection, [source]).status == "succeeded"
    assert Chunk.objects.get(document__external_id="doc-7").indexed_prefix == "Compass"


def test_a_bad_context_setting_fails_the_run_with_its_reason(compass, retrieval_settings):
    from django.core.exceptions import ImproperlyConfigured

    from retrieval.models import IndexRun

    retrieval_settings(CHUNK_CONTEXT={"title": True, "heading": True})
    with pytest.raises(ImproperlyConfigured, match=r'"source" \(bool\), "headings" \(bool\)'):
        compass()
    run = IndexRun.objects.latest()
    assert run.status == "failed" and "CHUNK_CONTEXT" in run.message
    assert not Document.objects.exists()


def test_rebuilt_postings_are_the_indexed_ones(compass):
    from django.db import connection

    from retrieval.services.registry import analyzers
    from retrieval.services.sparse.index import rebuild_postings

    collection, chunks = compass()

    def postings():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT term, chunk_id, tf, dl FROM retrieval_bm25_posting "
                "WHERE collection_id = %s ORDER BY 1, 2",
                [collection.pk],
            )
            return cursor.fetchall()

    before = postings()
    second = chunks[1].pk
    assert ("north", second) in {(term, chunk) for term, chunk, *_ in before}
    assert rebuild_postings(collection.pk, analyzers["default"]) == 2
    assert postings() == before


def test_the_api_and_the_admin_show_what_was_indexed(compass, admin_client):
    collection, chunks = compass()
    response = admin_client.get(f"/api/chunks/{chunks[1].pk}/")
    assert response.status_code == 200
    assert response.json()["indexed_text"] == chunks[1].indexed_text
    page = admin_client.get(f"/admin/retrieval/chunk/{chunks[1].pk}/change/")
    assert page.status_code == 200
    assert "away from iron.\nNorth\ncompass\n\nMagnetic declination" in page.content.decode()


# --- chunks fitted to the embedder's window ------------------------------------------------

LONG_MD = (
    b"# Compass\n\n## North\n\n"
    + b"The needle points north when held flat. " * 6
    + b"""

Magnetic declination differs from place to place.
"""
)


@pytest.mark.parametrize("fit", [False, True])
def test_chunks_the_embedder_would_truncate_are_split_to_fit_its_window(
    keyword_settings, retrieval_settings, fit
):
    retrieval_settings(
        EMBEDDERS={
            "default": {
                "BACKEND": "tests.support.embedders.WindowEmbedder",
                "OPTIONS": {"window": 30},
            }
        },
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                "OPTIONS": {"max_tokens": 80, "min_tokens": 0},
            }
        },
        FIT_EMBEDDER_WINDOW=fit,
    )
    collection = get_or_create_collection("window")[0]
    run = ingest(collection, [md_source(LONG_MD, "compass.md")])
    assert run.status == "succeeded", run.errors
    chunks = list(Document.objects.get(external_id="compass.md").chunks.order_by("index"))
    # Header "Compass / North / compass" (3 words) + blank line + content, plus 2.
    words = [len(c.indexed_prefix.split()) + len(c.content.split()) + 2 for c in chunks]
    if not fit:
        assert len(chunks) == 1 and words[0] > 30
        return
    assert len(chunks) > 1 and max(words) <= 30
    assert all(c.heading_path == ["Compass", "North"] for c in chunks)
    document = chunks[0].document
    # Nothing lost or repeated: the parts cover the text in order.
    assert [w for c in chunks for w in c.content.split()] == document.content.split()
    assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:], strict=False))
