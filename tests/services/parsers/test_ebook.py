"""EPUB books: real books written by pandoc from Markdown and small ones written here member by
member, read through every face (API upload, admin upload, retrieval_ingest), and hostile
books refused with a reason."""

from __future__ import annotations

import functools
import io
import re
import struct
import sys
import tempfile
import zipfile
from io import StringIO
from pathlib import Path

import pypandoc
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from retrieval.exceptions import ParseError, ParserUnavailable
from retrieval.models import Chunk, Document
from retrieval.services.ingestion.parsing import parser_for
from retrieval.services.parsers.ebook import EpubParser
from retrieval.testing.parsers import ParserSuite, assert_well_formed
from tests.services.parsers.uploads import api_client, post_to_admin, post_to_api

EPUB = "application/epub+zip"
TEA = """---
title: The Tea Book
author: [Ada Lovelace, Charles Babbage]
lang: en
---

# Brewing

Water first, then the leaves.

## Green tea

Steep green tea for two minutes at eighty degrees.

# Storing

Keep the leaves dry and dark, away from spices.
"""
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
)


@functools.cache
def pandoc_book(markdown: str = TEA) -> bytes:
    """An EPUB 3 book (with an EPUB 2 NCX beside its navigation document) written by pandoc."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "book.epub"
        pypandoc.convert_text(markdown, "epub3", format="markdown", outputfile=str(out))
        return out.read_bytes()


def xhtml(body: str, *, head: str = '<?xml version="1.0" encoding="utf-8"?>') -> bytes:
    return (
        f'{head}<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Handmade</title></head>'
        f"<body>{body}</body></html>"
    ).encode()


def book_zip(members: dict[str, bytes]) -> bytes:
    """A zip with ``mimetype`` stored first, as EPUB readers expect, then ``members``."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", EPUB, compress_type=zipfile.ZIP_STORED)
        for name, content in members.items():
            archive.writestr(name, content)
    return out.getvalue()


CONTAINER = (
    b'<?xml version="1.0"?><container version="1.0" '
    b'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
    b'<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    b"</rootfiles></container>"
)


def handmade_book(
    chapters: dict[str, bytes],
    *,
    spine: list[str],
    ncx: dict[str, str] | None = None,
    head: str = '<?xml version="1.0"?>',
    extra: dict[str, bytes] | None = None,
) -> bytes:
    """An EPUB 2 book of ``chapters`` (file name -> XHTML) read in ``spine`` order, titled
    by an NCX of ``ncx`` (file name -> title) when given."""
    items = "".join(
        f'<item id="{name}" href="{name}" media-type="application/xhtml+xml"/>' for name in chapters
    )
    items += '<item id="cover" href="cover.png" media-type="image/png"/>'
    if ncx is not None:
        items += '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
    itemrefs = "".join(f'<itemref idref="{name}"/>' for name in spine)
    toc = ' toc="ncx"' if ncx is not None else ""
    opf = (
        f'{head}<package xmlns="http://www.idpf.org/2007/opf" version="2.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        "<dc:title>Handmade</dc:title><dc:creator>Grace Hopper</dc:creator></metadata>"
        f"<manifest>{items}</manifest>"
        f"<spine{toc}>{itemrefs}</spine></package>"
    )
    members = {"META-INF/container.xml": CONTAINER, "OEBPS/content.opf": opf.encode()}
    members.update({f"OEBPS/{name}": content for name, content in chapters.items()})
    members["OEBPS/cover.png"] = b"\x89PNG\r\n\x1a\n"
    if ncx is not None:
        points = "".join(
            f'<navPoint id="p{i}"><navLabel><text>{title}</text></navLabel>'
            f'<content src="{name}"/></navPoint>'
            for i, (name, title) in enumerate(ncx.items())
        )
        members["OEBPS/toc.ncx"] = (
            '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" '
            f'version="2005-1"><navMap>{points}</navMap></ncx>'
        ).encode()
    members.update(extra or {})
    return book_zip(members)


def three_chapters(**options) -> bytes:
    chapters = {
        "b.xhtml": xhtml("<h1>Second</h1><p>The middle of the book.</p>"),
        "a.xhtml": xhtml("<p>It begins without a heading.</p>"),
        "c.xhtml": xhtml("<h2>Afterword</h2><p>The end.</p>"),
        "image.xhtml": xhtml('<img src="cover.png"/>'),
    }
    return handmade_book(
        chapters,
        spine=["image.xhtml", "a.xhtml", "b.xhtml", "a.xhtml", "c.xhtml"],
        **options,
    )


class TestEpubParser(ParserSuite):
    sample = ("tea.epub", EPUB, pandoc_book())

    def make_parser(self):
        return EpubParser()


def test_chapters_are_sections_titled_by_the_table_of_contents():
    document = EpubParser().parse(pandoc_book(), filename="tea.epub")
    assert_well_formed(document)
    assert document.title == "The Tea Book"
    assert document.metadata == {
        "format": "epub",
        "chapters": 3,  # pandoc's title page, then the two chapters
        "authors": ["Ada Lovelace", "Charles Babbage"],
        "language": "en",
    }
    paths = [s.heading_path for s in document.sections]
    assert paths == [("The Tea Book",), ("Brewing",), ("Brewing", "Green tea"), ("Storing",)]
    green = document.sections[2]
    assert document.text[green.start : green.end] == (
        "Green tea\n\nSteep green tea for two minutes at eighty degrees."
    )


def test_the_spine_decides_the_order_and_the_ncx_the_titles():
    data = three_chapters(ncx={"a.xhtml": "Opening", "b.xhtml": "Second"})
    document = EpubParser().parse(data, filename="hand.epub")
    assert_well_formed(document)
    assert document.title == "Handmade" and document.metadata["authors"] == ["Grace Hopper"]
    # The image page has no text; a.xhtml, listed twice in the spine, is read once; c.xhtml,
    # not in the table of contents, is titled by its first heading.
    assert [s.heading_path for s in document.sections] == [
        ("Opening",),
        ("Second",),
        ("Afterword",),
    ]
    assert document.text.startswith("It begins without a heading.\n\nSecond\n\nThe middle")
    assert document.metadata["chapters"] == 3


def test_without_a_table_of_contents_a_chapter_is_titled_by_its_first_heading():
    document = EpubParser().parse(three_chapters(), filename="hand.epub")
    assert [s.heading_path for s in document.sections] == [(), ("Second",), ("Afterword",)]


# Hostile and broken books.


def zip_bomb() -> bytes:
    """A chapter of 8 MB of spaces, deflated about a thousand times."""
    return handmade_book(
        {"a.xhtml": xhtml("<p>tea</p>" + " " * (8 * 1024 * 1024))}, spine=["a.xhtml"]
    )


def laughing_opf() -> bytes:
    return handmade_book({"a.xhtml": xhtml("<p>tea</p>")}, spine=["a.xhtml"], head=LAUGHS)


def laughing_chapter() -> bytes:
    return handmade_book(
        {"a.xhtml": xhtml("<p>&lol3;</p>", head=LAUGHS)}, spine=["a.xhtml"], ncx={"a.xhtml": "A"}
    )


def rewrite(data: bytes, name: str, edit) -> bytes:
    """Return the zip ``data`` with member ``name`` passed through ``edit``; ``None`` drops it."""
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    assert name in source.namelist()
    with zipfile.ZipFile(out, "w") as target:
        for member in source.infolist():
            content = source.read(member)
            if member.filename == name:
                content = edit(content)
            if content is not None:
                target.writestr(member, content)
    return out.getvalue()


def laughing_ncx() -> bytes:
    data = handmade_book({"a.xhtml": xhtml("<p>tea</p>")}, spine=["a.xhtml"], ncx={})
    return rewrite(data, "OEBPS/toc.ncx", lambda xml: LAUGHS.encode() + xml.split(b"?>", 1)[1])


def drm_book() -> bytes:
    encryption = (
        b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
        b'<enc:CipherReference URI="OEBPS/a.xhtml"/></enc:CipherData></enc:EncryptedData>'
        b"</encryption>"
    )
    return handmade_book(
        {"a.xhtml": b"\x8f\x00ciphered"},
        spine=["a.xhtml"],
        extra={"META-INF/encryption.xml": encryption},
    )


HOSTILE = [
    (zip_bomb, r"OEBPS/a.xhtml expands \d+ times .*MAX_ARCHIVE_RATIO"),
    (laughing_opf, r"OEBPS/content.opf declares XML entities or external references"),
    (laughing_chapter, r"chapter OEBPS/a.xhtml declares XML entities, which are refused"),
    (laughing_ncx, r"OEBPS/toc.ncx declares XML entities or external references"),
    (lambda: b"Just some text, named like a book.", r"not an EPUB book \(not a zip\)"),
    (
        lambda: book_zip({"chapter.xhtml": xhtml("<p>tea</p>")}),
        r"not an EPUB book \(the zip has no META-INF/container.xml\)",
    ),
    (drm_book, r"its chapters are encrypted \(DRM\), OEBPS/a.xhtml first"),
    (
        lambda: handmade_book({"a.xhtml": xhtml("<p> </p>")}, spine=["a.xhtml"]),
        r"its chapters have no text",
    ),
]
HOSTILE_IDS = ["zip-bomb", "laughs-opf", "laughs-chapter", "laughs-ncx", "text", "zip", "drm",
               "empty"]  # fmt: skip


@pytest.mark.parametrize(("data", "reason"), HOSTILE, ids=HOSTILE_IDS)
def test_a_hostile_or_broken_book_is_refused_with_a_reason(data, reason):
    with pytest.raises(ParseError, match=reason):
        EpubParser().parse(data(), filename="hostile.epub")


def test_a_chapter_the_book_lists_but_does_not_hold_is_named():
    data = handmade_book({"a.xhtml": xhtml("<p>tea</p>")}, spine=["a.xhtml"])
    data = rewrite(data, "OEBPS/content.opf", lambda xml: xml.replace(b'"a.xhtml"', b'"b.xhtml"'))
    with pytest.raises(ParseError, match=r"it lists OEBPS/b.xhtml, which it does not hold"):
        EpubParser().parse(data, filename="gap.epub")


def test_a_member_without_a_name_is_passed_over():
    # zipfile's ZipInfo.is_dir() raised IndexError on it inside the archive checks.
    data = bytearray(
        handmade_book({"a.xhtml": xhtml("<p>tea</p>")}, spine=["a.xhtml"], extra={"z": b"?"})
    )
    entry = data.rindex(b"PK\x01\x02")  # the last member's directory entry: "z"
    struct.pack_into("<HH", data, entry + 28, 0, 1)  # no name; its one byte read as extra
    assert EpubParser().parse(bytes(data), filename="odd.epub").text == "tea"


def test_a_damaged_zip_directory_is_a_parse_error():
    data = bytearray(pandoc_book())
    entry = data.index(b"PK\x01\x02")
    data[entry + 6] = 200  # "version needed to extract": 20.0, which zipfile refuses
    with pytest.raises(ParseError, match=r"not a readable zip \(zip file version 20.0\)"):
        EpubParser().parse(bytes(data), filename="damaged.epub")


def test_the_archive_limits_apply_before_a_member_is_read(retrieval_settings):
    retrieval_settings(MAX_ARCHIVE_MEMBERS=3)
    with pytest.raises(ParseError, match=r"members; the limit is 3 \(MAX_ARCHIVE_MEMBERS\)"):
        EpubParser().parse(pandoc_book(), filename="tea.epub")
    retrieval_settings(MAX_ARCHIVE_MEMBERS=1000, MAX_ARCHIVE_BYTES=1000)
    with pytest.raises(ParseError, match=r"the limit is 1000 \(MAX_ARCHIVE_BYTES\)"):
        EpubParser().parse(pandoc_book(), filename="tea.epub")


def test_without_defusedxml_an_epub_is_unsupported_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "defusedxml", None)  # what `import` sees when absent
    with pytest.raises(ParserUnavailable, match=r'pip install "django-retrieval\[ebook\]"'):
        parser_for(filename="tea.epub")
    with pytest.raises(ParserUnavailable, match=r"defusedxml is not installed"):
        EpubParser().parse(pandoc_book(), filename="tea.epub")


def test_the_bytes_choose_the_epub_parser_whatever_the_name():
    assert isinstance(parser_for(filename="tea.zip", data=pandoc_book()), EpubParser)


# The faces: API multipart upload, admin upload, retrieval_ingest on a folder.

pytest_db = pytest.mark.django_db


def assert_book_chunked(collection_slug: str) -> None:
    """The book's chunks carry their chapter's title, a section's under its chapter's."""
    book = Document.objects.get(collection__slug=collection_slug, external_id__endswith="tea.epub")
    assert book.status == Document.Status.INDEXED, book.error
    assert book.title == "The Tea Book"
    assert book.metadata["authors"] == ["Ada Lovelace", "Charles Babbage"]
    paths: dict[tuple[str, ...], str] = {}
    for chunk in book.chunks.order_by("index"):
        key = tuple(chunk.heading_path)
        paths[key] = f"{paths.get(key, '')} {chunk.content}"
    assert "eighty degrees" in paths[("Brewing", "Green tea")]
    assert "away from spices" in paths[("Storing",)]


@pytest.fixture
def api(keyword_settings) -> APIClient:
    return api_client("Books")


@pytest_db
def test_the_api_indexes_a_book(api):
    response = post_to_api(api, "books", "tea.epub", pandoc_book(), EPUB)
    assert response.status_code == 201, response.json()
    assert_book_chunked("books")


@pytest_db
def test_the_api_answers_415_naming_the_extra_without_defusedxml(api, monkeypatch):
    monkeypatch.setitem(sys.modules, "defusedxml", None)
    response = post_to_api(api, "books", "tea.epub", pandoc_book(), EPUB)
    assert response.status_code == 415
    assert 'pip install "django-retrieval[ebook]"' in response.json()["detail"]
    assert not Document.objects.exists()


@pytest_db
@pytest.mark.parametrize(("data", "reason"), HOSTILE[:5], ids=HOSTILE_IDS[:5])
def test_the_api_refuses_a_hostile_book_with_its_reason_storing_nothing(api, data, reason):
    response = post_to_api(api, "books", "hostile.epub", data(), EPUB)
    assert response.status_code == 400, response.json()
    assert re.search(reason, str(response.json()))
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest_db
def test_the_api_answers_415_for_a_zip_named_epub(api):
    response = post_to_api(api, "books", "fake.epub", zip_of_text(), EPUB)
    assert response.status_code == 415
    assert "zip archive (its name says .epub)" in response.json()["detail"]
    assert not Document.objects.exists()


def zip_of_text() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "tea")
    return out.getvalue()


@pytest_db
def test_the_admin_upload_indexes_a_book(admin_client, keyword_settings):
    response = post_to_admin(admin_client, "Books", "tea.epub", pandoc_book(), EPUB)
    assert response.status_code == 200
    assert_book_chunked("books")


@pytest_db
def test_the_admin_upload_names_the_reason_a_book_is_refused(admin_client):
    response = post_to_admin(admin_client, "Books", "hostile.epub", laughing_opf(), EPUB)
    assert "declares XML entities" in response.content.decode()
    book = Document.objects.get()
    assert book.status == Document.Status.FAILED and "declares XML entities" in book.error
    assert not Chunk.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_indexes_a_folder_of_books(keyword_settings, tmp_path):
    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "tea.epub").write_bytes(pandoc_book())
    call_command("retrieval_ingest", str(folder), collection="Books", stdout=StringIO())
    assert_book_chunked("books")
    # A hostile book beside it is reported failed with its reason, the good one unchanged.
    (folder / "bomb.epub").write_bytes(zip_bomb())
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 2 documents failed"):
        call_command("retrieval_ingest", str(folder), collection="Books", stdout=out)
    assert "MAX_ARCHIVE_RATIO" in out.getvalue()
    bomb = Document.objects.get(external_id__endswith="bomb.epub")
    assert bomb.status == Document.Status.FAILED and not bomb.chunks.exists()
