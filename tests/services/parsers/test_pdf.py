"""PdfParser on PDFs built in the test: pages, outlines, and the ways a PDF can fail."""

from __future__ import annotations

import random
import subprocess
import sys

import pymupdf
import pytest

from retrieval.exceptions import ParseError
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.types import ParsedDocument
from retrieval.testing.parsers import assert_well_formed


def build_pdf(
    pages: list[str],
    *,
    toc: list[list[object]] | None = None,
    title: str = "",
    **save_options: object,
) -> bytes:
    with pymupdf.open() as document:
        for text in pages:
            page = document.new_page()
            if text:
                page.insert_text((72, 72), text)
        if toc:
            document.set_toc(toc)
        if title:
            document.set_metadata({"title": title})
        return document.tobytes(**save_options)


def parse(data: bytes, filename: str | None = "report.pdf", **options: bool) -> ParsedDocument:
    return PdfParser(**options).parse(data, filename=filename)


THREE_PAGES = [
    "Alpha page\nfirst body line",
    "Beta page\nsecond body line",
    "Gamma page\nthird body line",
]


def test_each_page_lands_in_its_own_one_based_section() -> None:
    document = parse(build_pdf(THREE_PAGES))

    assert [s.page for s in document.sections] == [1, 2, 3]
    for section, expected in zip(document.sections, THREE_PAGES, strict=True):
        assert document.text[section.start : section.end] == expected
    assert_well_formed(document)


def test_pages_are_joined_by_a_blank_line() -> None:
    assert parse(build_pdf(THREE_PAGES)).text == "\n\n".join(THREE_PAGES)


def test_blank_pages_get_no_section_and_keep_later_page_numbers() -> None:
    document = parse(build_pdf(["first", "", "third"]))

    assert document.text == "first\n\nthird"
    assert [s.page for s in document.sections] == [1, 3]
    assert document.metadata["page_count"] == 3


def test_outline_headings_split_pages_into_sections() -> None:
    pages = [
        "1 Introduction\nWhy this exists.\n1.1 Scope\nWhat it covers.",
        "More scope text.\n2 Usage\nHow to use it.",
    ]
    toc = [[1, "Introduction", 1], [2, "Scope", 1], [1, "Usage", 2]]

    document = parse(build_pdf(pages, toc=toc))
    spans = [
        (s.page, s.heading_path, s.continues, document.text[s.start : s.end])
        for s in document.sections
    ]

    # A heading line is a block of its own; page 2 goes on with the part page 1 ended in.
    assert spans == [
        (1, ("Introduction",), False, "1 Introduction\n\nWhy this exists."),
        (1, ("Introduction", "Scope"), False, "1.1 Scope\n\nWhat it covers."),
        (2, ("Introduction", "Scope"), True, "More scope text."),
        (2, ("Usage",), False, "2 Usage\n\nHow to use it."),
    ]
    assert_well_formed(document)


def test_outline_heading_missing_from_its_page_applies_from_the_next_page() -> None:
    toc = [[1, "Alpha page", 1], [1, "Not printed anywhere", 2]]

    document = parse(build_pdf(THREE_PAGES, toc=toc))

    assert [(s.page, s.heading_path) for s in document.sections] == [
        (1, ("Alpha page",)),
        (2, ("Alpha page",)),
        (3, ("Not printed anywhere",)),
    ]


def test_outline_can_be_ignored() -> None:
    document = parse(build_pdf(THREE_PAGES, toc=[[1, "Beta page", 2]]), use_outline=False)

    assert all(s.heading_path == () for s in document.sections)


def test_title_prefers_metadata_then_first_line() -> None:
    assert parse(build_pdf(THREE_PAGES, title="Annual report")).title == "Annual report"
    with pymupdf.open() as document:
        document.new_page()
        page = document.new_page()
        page.insert_text((72, 72), "  Opening line  ", fontsize=16)
        page.insert_text((72, 100), "body text of the page", fontsize=11)
        data = document.tobytes()
    assert parse(data).title == "Opening line"


def test_a_first_line_set_as_the_text_is_no_title() -> None:
    # A label, a salutation, a sentence cut at the margin: the file's name says more.
    assert parse(build_pdf(["", "Opening line\nbody"]), filename="minutes.pdf").title == "minutes"


@pytest.mark.parametrize("keep", [0.1, 0.3, 0.5, 0.95])
def test_truncated_pdf_is_a_parse_error(keep: float) -> None:
    data = build_pdf(THREE_PAGES)

    with pytest.raises(ParseError, match="'report.pdf'.*not a readable PDF"):
        parse(data[: int(len(data) * keep)])


def test_bytes_after_the_end_of_file_marker_are_tolerated() -> None:
    data = build_pdf(THREE_PAGES) + b"\n" + b"x" * 5000

    assert parse(data).text == "\n\n".join(THREE_PAGES)


def test_random_bytes_are_a_parse_error() -> None:
    noise = random.Random(7).randbytes(4096)

    with pytest.raises(ParseError, match="not a readable PDF"):
        parse(noise)


@pytest.mark.parametrize("data", [b"#\r", b"# a note, not a PDF"])
def test_bytes_mupdf_repairs_into_pages_without_objects_are_a_parse_error(data: bytes) -> None:
    """MuPDF makes a page of these with no object behind it; looking the page's object
    up crashed the process (found by the parser suite's fuzzing). Run in a child process
    so that a crash fails this test instead of ending the session."""
    child = (
        "import django, os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'tests.support.settings'; "
        "django.setup()\n"
        "from retrieval.exceptions import ParseError\n"
        "from retrieval.services.parsers.pdf import PdfParser\n"
        "try:\n"
        f"    PdfParser().parse({data!r}, filename='note.pdf')\n"
        "except ParseError as e:\n"
        "    print(e)\n"
    )
    ran = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)

    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "Cannot parse 'note.pdf': it is not a PDF (it has no objects)." in ran.stdout


def test_encrypted_pdf_needing_a_password_is_a_parse_error() -> None:
    data = build_pdf(
        THREE_PAGES,
        encryption=pymupdf.PDF_ENCRYPT_AES_256,
        user_pw="secret",
        owner_pw="owner-secret",
    )

    with pytest.raises(ParseError, match="encrypted and needs a password"):
        parse(data)


def test_pdf_encrypted_with_only_an_owner_password_is_read() -> None:
    data = build_pdf(THREE_PAGES, encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner")

    assert parse(data).text.startswith("Alpha page")


def test_pdf_without_text_is_a_parse_error_about_ocr() -> None:
    with pymupdf.open() as document:
        page = document.new_page()
        page.draw_rect(pymupdf.Rect(72, 72, 300, 300), color=(0, 0, 0), fill=(0.4, 0.4, 0.4))
        data = document.tobytes()

    with pytest.raises(ParseError, match=r"no extractable text \(no images\)"):
        parse(data)
