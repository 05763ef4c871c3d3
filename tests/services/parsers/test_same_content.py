"""The same document in another format gets the same title and text furniture-free.

Found by ``bench/formats.py`` (a documentation set converted by pandoc to DOCX, ODT,
EPUB and PDF): files are written here by pandoc and pymupdf as the bench writes them.
"""

from __future__ import annotations

import io

import pymupdf
import pypandoc
import pytest

from retrieval.services.chunkers.recursive import RecursiveChunker
from retrieval.services.parsers.opendocument import OdtParser
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.parsers.pdf_furniture import drop_running_lines
from retrieval.services.parsers.word import DocxParser

#: A page of documentation that opens at a subheading, as many do (their title is in
#: the site's navigation, not in the file).
OPENS_AT_SUBHEADING = (
    "Handlers can share objects created at startup.\n\n"
    "## Lifespan State\n\nThe lifespan yields a dictionary of state.\n"
)


def pandoc(markdown: str, to: str, tmp_path) -> bytes:
    out = tmp_path / f"converted.{to}"
    pypandoc.convert_text(markdown, to, format="gfm", outputfile=str(out))
    return out.read_bytes()


@pytest.mark.parametrize("parser, to", [(OdtParser(), "odt"), (DocxParser(), "docx")])
def test_a_subheading_does_not_title_the_document(parser, to, tmp_path):
    document = parser.parse(pandoc(OPENS_AT_SUBHEADING, to, tmp_path), filename=f"lifespan.{to}")
    assert document.title == "lifespan"
    assert document.sections[-1].heading_path == ("Lifespan State",)


@pytest.mark.parametrize("parser, to", [(OdtParser(), "odt"), (DocxParser(), "docx")])
def test_the_top_heading_titles_the_document(parser, to, tmp_path):
    data = pandoc("# Lifespan\n\n" + OPENS_AT_SUBHEADING, to, tmp_path)
    assert parser.parse(data, filename=f"lifespan.{to}").title == "Lifespan"


def printed_manual(pages: list[str], *, header: str = "Acme 2.0 documentation") -> bytes:
    """A PDF typeset as a manual is printed: its name atop each page, the number below."""
    with pymupdf.open() as pdf:
        for number, text in enumerate(pages, start=1):
            page = pdf.new_page(width=595, height=842)
            page.insert_text((56, 40), header, fontsize=8)
            page.insert_textbox(pymupdf.Rect(56, 64, 539, 778), text, fontsize=11)
            page.insert_text((297, 818), str(number), fontsize=8)
        return pdf.tobytes()


def test_running_headers_and_page_numbers_are_left_out_of_a_pdf():
    pages = [
        "Handlers can share objects created at startup.",
        "The lifespan yields a dictionary of state.",
        "Each request gets a shallow copy of it.",
    ]
    document = PdfParser().parse(printed_manual(pages), filename="lifespan.pdf")
    assert "Acme" not in document.text
    assert [line for line in document.text.split("\n") if line.strip().isdigit()] == []
    assert document.title == "lifespan"  # not the running header, nor a sentence
    assert all(page in document.text for page in pages)


def test_a_title_page_without_the_running_header_keeps_its_text():
    pages = ["Acme Manual\nSecond edition", "Installing it.\nWith pip.", "Running it.\nTwice."]
    with pymupdf.open() as pdf:
        for number, text in enumerate(pages):
            page = pdf.new_page(width=595, height=842)
            if number:
                page.insert_text((56, 40), "Acme Manual, chapter 1", fontsize=8)
                page.insert_textbox(pymupdf.Rect(56, 64, 539, 778), text, fontsize=11)
            else:  # a title page: the title set large
                page.insert_text((56, 100), "Acme Manual", fontsize=24)
                page.insert_text((56, 140), "Second edition", fontsize=11)
        data = pdf.tobytes()
    document = PdfParser().parse(data, filename="manual.pdf")
    assert "chapter 1" not in document.text
    assert document.title == "Acme Manual"
    assert "Second edition" in document.text and "With pip." in document.text


def test_pages_of_one_line_alike_are_kept():
    with pymupdf.open() as pdf:
        for text in ("Slide 1", "Slide 2"):
            pdf.new_page(width=595, height=842).insert_text((56, 64), text, fontsize=11)
        data = pdf.tobytes()
    document = PdfParser().parse(data, filename="slides.pdf")
    assert "Slide 1" in document.text and "Slide 2" in document.text


def test_a_pdf_opening_with_a_sentence_is_titled_by_its_name():
    opening = (
        "Starlette applications can register a lifespan handler for dealing with code that "
        "needs to run before the application starts up, or when it is shutting down."
    )
    with pymupdf.open() as pdf:
        page = pdf.new_page(width=595, height=842)
        page.insert_textbox(pymupdf.Rect(56, 64, 539, 778), opening, fontsize=11)
        data = pdf.tobytes()
    document = PdfParser().parse(data, filename="lifespan.pdf")
    assert document.title == "lifespan"
    assert document.text.startswith("Starlette applications")


def one_page(*lines: tuple[str, float]) -> bytes:
    """A one-page PDF of ``(text, font size)`` lines, top down."""
    with pymupdf.open() as pdf:
        page = pdf.new_page(width=595, height=842)
        y = 64
        for text, size in lines:
            page.insert_text((56, y), text, fontsize=size)
            y += 2 * size
        return pdf.tobytes()


def test_a_pdf_opening_with_a_short_sentence_is_titled_by_its_name():
    data = one_page(
        ("Starlette includes a BackgroundTask class.", 11),
        ("It runs after the response is sent.", 11),
    )
    assert PdfParser().parse(data, filename="background.pdf").title == "background"


def test_a_one_page_pdf_is_not_titled_by_its_small_print_header():
    pages = ["Handlers can share objects created at startup\nwith the lifespan's state."]
    document = PdfParser().parse(printed_manual(pages), filename="applications.pdf")
    assert document.title == "applications"


def test_a_title_set_large_still_titles_a_pdf():
    data = one_page(("Lifespan", 18), ("Handlers can share objects created at startup", 11))
    assert PdfParser().parse(data, filename="x.pdf").title == "Lifespan"


def story_pdf(html: str, *, pages: int = 1) -> bytes:
    """HTML laid out by pymupdf's Story on A4 pages, as the bench typesets documentation."""
    story = pymupdf.Story(html=html, user_css="body {font-size: 10pt;} pre {font-size: 8.5pt;}")
    buffer = io.BytesIO()
    writer = pymupdf.DocumentWriter(buffer)
    more = True
    while more:
        device = writer.begin_page(pymupdf.paper_rect("a4"))
        more, _ = story.place(pymupdf.Rect(66, 64, 529, 778))
        story.draw(device)
        writer.end_page()
    writer.close()
    return buffer.getvalue()


WRAPPED = (
    "Starlette includes a few response classes that handle sending back the appropriate "
    "ASGI messages on the send channel, and each of them takes some content, a status "
    "code, headers and a media type."
)


def test_a_paragraph_wrapped_at_the_margin_reads_as_one_line():
    html = (
        f"<p>{WRAPPED}</p>"
        "<pre>async def app(scope, receive, send):\n    await response(scope, receive, send)</pre>"
        "<ul><li>content - A string or bytestring.</li><li>status_code - An integer.</li></ul>"
    )
    data = story_pdf(html)
    with pymupdf.open("pdf", data) as pdf:
        assert WRAPPED not in pdf[0].get_text()  # MuPDF gives it as laid out, in lines
    lines = PdfParser().parse(data, filename="responses.pdf").text.split("\n")
    assert WRAPPED in lines
    # Code keeps its indentation, list items stay apart, and the page's margin is gone.
    assert not lines[0].startswith(" ")
    assert "async def app(scope, receive, send):" in lines
    assert "    await response(scope, receive, send)" in lines
    assert [line.strip() for line in lines if "content -" in line or "status_code -" in line] == [
        "• content - A string or bytestring.",
        "• status_code - An integer.",
    ]


def test_a_part_running_over_a_page_turn_is_chunked_as_one():
    with pymupdf.open() as pdf:
        for text in ("Usage\nHandlers can share objects", "created at startup."):
            pdf.new_page(width=595, height=842).insert_text((56, 64), text, fontsize=11)
        pdf.set_toc([[1, "Usage", 1]])
        data = pdf.tobytes()
    document = PdfParser().parse(data, filename="usage.pdf")
    assert [(s.page, s.heading_path, s.continues) for s in document.sections] == [
        (1, ("Usage",), False),
        (2, ("Usage",), True),
    ]
    spans = RecursiveChunker().chunk(document.text, sections=document.sections)
    assert [document.text[s.start : s.end] for s in spans] == [
        "Usage\n\nHandlers can share objects\n\ncreated at startup."
    ]


def test_a_page_opening_at_a_new_heading_does_not_continue_the_part_before():
    with pymupdf.open() as pdf:
        for text in ("Usage\nHandlers share objects.", "Testing\nUse the test client."):
            pdf.new_page(width=595, height=842).insert_text((56, 64), text, fontsize=11)
        pdf.set_toc([[1, "Usage", 1], [1, "Testing", 2]])
        data = pdf.tobytes()
    document = PdfParser().parse(data, filename="guide.pdf")
    assert [s.continues for s in document.sections] == [False, False]
    spans = RecursiveChunker().chunk(document.text, sections=document.sections)
    assert len(spans) == 2


def test_a_pdf_opening_at_one_of_several_top_headings_is_titled_by_its_name():
    # Release notes: each version a top heading, set large; the first is no title.
    with pymupdf.open() as pdf:
        page = pdf.new_page(width=595, height=842)
        page.insert_text((56, 64), "1.10.0 (October 24, 2026)", fontsize=16)
        page.insert_text((56, 96), "Compare multidicts by key.", fontsize=11)
        page.insert_text((56, 128), "1.9.0 (October 18, 2026)", fontsize=16)
        page.insert_text((56, 160), "Build form fields in the parser callbacks.", fontsize=11)
        pdf.set_toc([[1, "1.10.0 (October 24, 2026)", 1], [1, "1.9.0 (October 18, 2026)", 1]])
        data = pdf.tobytes()
    assert PdfParser().parse(data, filename="release-notes.pdf").title == "release-notes"
    with pymupdf.open("pdf", data) as pdf:
        pdf.set_toc([[1, "1.10.0 (October 24, 2026)", 1]])  # one top heading: the title
        data = pdf.tobytes()
    assert PdfParser().parse(data, filename="x.pdf").title == "1.10.0 (October 24, 2026)"


def test_code_in_an_odt_keeps_its_lines_together_and_its_indentation(tmp_path):
    # pandoc writes code as one "Preformatted Text" paragraph a line, indentation as text:s.
    markdown = (
        "Call it as an ASGI application.\n\n"
        "```python\nasync def app(scope, receive, send):\n"
        "    response = Response('Hello')\n\n    await response(scope, receive, send)\n```\n\n"
        "## Set Cookie\n\nSet cookies on the response.\n"
    )
    text = OdtParser().parse(pandoc(markdown, "odt", tmp_path), filename="r.odt").text
    assert (
        "Call it as an ASGI application.\n\n"
        "async def app(scope, receive, send):\n    response = Response('Hello')\n\n"
        "    await response(scope, receive, send)\n\nSet Cookie\n\n"
    ) in text


def test_a_running_header_ocr_read_with_a_space_fewer_is_still_left_out():
    pages = [
        "starlette1.10.0 documentation\nResponses send ASGI messages.\n1",
        "starlette 1.10.0 documentation\nA cookie is set on the response.\n2",
        "starlette 1.10.0 documentation\nA file is streamed.\n3",
    ]
    assert drop_running_lines(pages) == [
        "Responses send ASGI messages.",
        "A cookie is set on the response.",
        "A file is streamed.",
    ]
