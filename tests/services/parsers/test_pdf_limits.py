"""PDF bombs are refused by the limit they pass, before the work (issue 30).

The red team's 361 KB PDF held one 124 MB compressed stream and took 27.6 s to read.
The hostile files are written here by a tiny generator, and the limits lowered so
that small files pass them; no assertion is about time.
"""

from __future__ import annotations

import zlib

import pytest

from retrieval.exceptions import ParseError
from retrieval.models import Document
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexing import Source, ingest
from retrieval.services.parsers import pdf
from retrieval.services.parsers.pdf import PdfParser
from tests.services.parsers.test_pdf import THREE_PAGES, build_pdf

MB = 1024 * 1024
FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def raw_pdf(
    page_contents: list[bytes],
    forms: list[bytes] = (),
    *,
    compress: bool = True,
    font: bytes = FONT,
    extra: list[bytes] = (),
) -> bytes:
    """A PDF of one page per content stream; ``forms[i]`` is the form named ``/X`` in
    the page and in ``forms[i - 1]`` (so each draws the next), the last one showing text.
    ``font`` is /F1, object 3; ``extra`` objects are numbered from 4, before the forms."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", font, *extra]  # 1, 2, 3, 4...
    first_form = len(objects) + 1
    for index, body in enumerate(forms):
        nested = first_form + index + 1
        names = f"/XObject << /X {nested} 0 R >>" if index + 1 < len(forms) else ""
        resources = f"<< /Font << /F1 3 0 R >> {names} >>".encode()
        objects.append(
            _stream(
                body,
                b"/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources " + resources,
                compress=compress,
            )
        )
    kids = []
    for body in page_contents:
        objects.append(_stream(body, b"", compress=compress))
        content = len(objects)
        form = f"/XObject << /X {first_form} 0 R >>" if forms else ""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
            f"/Resources << /Font << /F1 3 0 R >> {form} >> >>".encode()
        )
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    start = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        start,
    )
    return bytes(out)


def _stream(body: bytes, entries: bytes, *, compress: bool) -> bytes:
    data = zlib.compress(body, 9) if compress else body
    flate = b" /Filter /FlateDecode" if compress else b""
    return b"<< %s/Length %d%s >>\nstream\n%s\nendstream" % (entries, len(data), flate, data)


def text(words: str, y: int = 700) -> bytes:
    return b"BT /F1 12 Tf 72 %d Td (%s) Tj ET\n" % (y, words.encode())


def parse(data: bytes):
    return PdfParser().parse(data, filename="bomb.pdf")


def test_a_pdf_of_more_pages_than_the_limit_is_refused(retrieval_settings):
    retrieval_settings(MAX_PDF_PAGES=2)
    with pytest.raises(ParseError, match=r"it has 3 pages; the limit is 2 \(MAX_PDF_PAGES\)"):
        parse(build_pdf(THREE_PAGES))
    retrieval_settings(MAX_PDF_PAGES=3)
    assert parse(build_pdf(THREE_PAGES)).metadata["page_count"] == 3


def test_a_stream_decompressing_past_the_limit_is_refused(retrieval_settings):
    retrieval_settings(MAX_PDF_DECOMPRESSED_BYTES=MB)
    bomb = raw_pdf([text("hello") + b" " * (4 * MB)])
    assert len(bomb) < 10_000  # 4 MB of spaces compress to about 4 kB
    with pytest.raises(
        ParseError,
        match=r"'bomb.pdf': its streams decompress to more than 1048576 bytes "
        r"\(MAX_PDF_DECOMPRESSED_BYTES\)",
    ):
        parse(bomb)
    retrieval_settings(MAX_PDF_DECOMPRESSED_BYTES=5 * MB)
    assert parse(bomb).text == "hello"


def test_forms_drawing_forms_count_every_time_they_are_drawn(retrieval_settings):
    # Six forms, each drawing the next ten times: 100,000 draws of a few bytes each.
    retrieval_settings(MAX_PDF_DECOMPRESSED_BYTES=MB)
    bomb = raw_pdf([b"/X Do"], forms=[b"/X Do " * 10] * 5 + [text("x")], compress=False)
    assert len(bomb) < 3_000
    with pytest.raises(ParseError, match="drawing its pages interprets more than 1048576 bytes"):
        parse(bomb)
    retrieval_settings(MAX_PDF_DECOMPRESSED_BYTES=20 * MB)
    assert parse(bomb).text == "x"


@pytest.mark.parametrize(
    ("declared", "refused"), [(b"1000 0 d0", True), (b"1000 0 0 0 1000 1000 d1", False)]
)
def test_type3_glyphs_drawn_each_time_shown_count_each_time(retrieval_settings, declared, refused):
    # A glyph drawn in colour (d0) is run at every showing; a cached one (d1) once.
    retrieval_settings(MAX_PDF_DECOMPRESSED_BYTES=MB)
    glyph = _stream(declared + b" " * 20_000, b"", compress=True)
    type3 = (
        b"<< /Type /Font /Subtype /Type3 /FontBBox [0 0 1000 1000] /FontMatrix [0.001 0 0 "
        b"0.001 0 0] /CharProcs << /a 4 0 R >> /Encoding << /Type /Encoding /Differences "
        b"[97 /a] >> /FirstChar 97 /LastChar 97 /Widths [1000] >>"
    )
    shown = raw_pdf([text("a" * 100)], font=type3, extra=[glyph])
    if refused:
        with pytest.raises(ParseError, match="drawing its pages interprets more than 1048576"):
            parse(shown)
    else:
        assert parse(shown).text.startswith("aaa")  # read (the rest runs off the page)


def test_the_time_budget_is_checked_between_pages(retrieval_settings):
    retrieval_settings(MAX_PARSE_SECONDS=0)
    with pytest.raises(
        ParseError,
        match=r"took more than 0 s \(MAX_PARSE_SECONDS\); stopped before page 1 of 3",
    ):
        parse(build_pdf(THREE_PAGES))


def test_a_page_too_full_to_sort_keeps_mupdfs_order(monkeypatch):
    # Drawn bottom line first: sorting by position puts "top" first.
    page = text("bottom", y=100) + text("top", y=700)
    assert parse(raw_pdf([page])).text.split() == ["top", "bottom"]
    monkeypatch.setattr(pdf, "SORTED_PAGE_MAX_CHARS", 5)  # sorting costs Python work per word
    assert parse(raw_pdf([page])).text.split() == ["bottom", "top"]


@pytest.mark.django_db
def test_a_pdf_over_a_limit_fails_its_document_and_run_naming_it(
    keyword_settings, retrieval_settings
):
    retrieval_settings(MAX_PDF_PAGES=2)
    collection, _ = get_or_create_collection("reports")
    source = Source(external_id="big.pdf", data=build_pdf(THREE_PAGES), filename="big.pdf")
    run = ingest(collection, [source])
    assert run.status == run.Status.FAILED and run.documents_failed == 1
    assert "the limit is 2 (MAX_PDF_PAGES)" in run.errors[0]["error"]
    document = Document.objects.get(external_id="big.pdf")
    assert document.status == Document.Status.FAILED and "MAX_PDF_PAGES" in document.error
