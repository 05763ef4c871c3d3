"""Checks every parser must pass, each run on a valid sample of its format."""

from __future__ import annotations

import pymupdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.html import HtmlParser
from retrieval.services.parsers.json import JsonParser
from retrieval.services.parsers.markdown import MarkdownParser
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.parsers.rst import RstParser
from retrieval.services.parsers.text import TextParser
from retrieval.services.types import ParsedDocument


def assert_well_formed(document: ParsedDocument) -> None:
    """Fail unless the text is normalised and the sections are ordered, disjoint line spans."""
    text = document.text
    assert text == text.strip()
    assert "\n\n\n" not in text
    assert all(line == line.rstrip() for line in text.split("\n"))
    previous_end = 0
    for section in document.sections:
        assert previous_end <= section.start < section.end <= len(text), section
        assert section.start == 0 or text[section.start - 1] == "\n", section
        span = text[section.start : section.end]
        assert span.strip() and span == span.rstrip(), section  # may start with indentation
        assert section.page is None or section.page >= 1
        assert all(heading.strip() for heading in section.heading_path), section
        previous_end = section.end


def _pdf_sample() -> bytes:
    with pymupdf.open() as document:
        for number in (1, 2):
            page = document.new_page()
            page.insert_text((72, 72), f"Page {number} heading\nBody of page {number}.")
        document.set_toc([[1, "Page 1 heading", 1], [1, "Page 2 heading", 2]])
        return document.tobytes()


SAMPLES: list[tuple[BaseParser, str, str, bytes]] = [
    (TextParser(), "notes.txt", "text/plain", b"Notes\r\n\r\n\r\nSecond   \r\nThird\n"),
    (
        MarkdownParser(),
        "guide.md",
        "text/markdown",
        b"Intro\n\n# Guide\n\nText *here*.\n\n## Install\n\n```\npip install x\n```\n",
    ),
    (
        HtmlParser(),
        "page.html",
        "text/html",
        b"<title>T</title><p>Intro</p><h1>Main</h1><p>One</p><h2>Sub</h2><pre>  x\n\n\n y</pre>",
    ),
    (JsonParser(), "data.json", "application/json", b'{"title": "T", "a": {"b": [1, 2]}}'),
    (PdfParser(), "report.pdf", "application/pdf", _pdf_sample()),
    (
        RstParser(),
        "guide.rst",
        "text/x-rst",
        b"=====\nGuide\n=====\n\nText *here*.\n\nInstall\n-------\n\n"
        b".. code-block:: sh\n\n   pip install x\n",
    ),
]
IDS = [type(parser).__name__ for parser, *_ in SAMPLES]


@pytest.mark.parametrize(("parser", "filename", "mime_type", "data"), SAMPLES, ids=IDS)
def test_sample_parses_to_well_formed_document(
    parser: BaseParser, filename: str, mime_type: str, data: bytes
) -> None:
    document = parser.parse(data, filename=filename)

    assert document.text
    assert document.title
    assert_well_formed(document)


@pytest.mark.parametrize(("parser", "filename", "mime_type", "data"), SAMPLES, ids=IDS)
def test_sample_parses_without_a_filename(
    parser: BaseParser, filename: str, mime_type: str, data: bytes
) -> None:
    assert parser.parse(data).text == parser.parse(data, filename=filename).text


@pytest.mark.parametrize(("parser", "filename", "mime_type", "data"), SAMPLES, ids=IDS)
def test_accepts_its_mime_type_and_extension(
    parser: BaseParser, filename: str, mime_type: str, data: bytes
) -> None:
    assert parser.accepts(mime_type=mime_type)
    assert parser.accepts(mime_type=f"{mime_type.upper()}; charset=utf-8")
    assert parser.accepts(filename=f"/some/dir/{filename.upper()}")
    assert not parser.accepts(mime_type="application/zip", filename="archive.zip")
    assert parser.default_mime_type == mime_type
    assert all(ext.startswith(".") and ext == ext.lower() for ext in parser.extensions)
    assert all(mime == mime.lower() for mime in parser.mime_types)


@pytest.mark.parametrize(("parser", "filename", "mime_type", "data"), SAMPLES, ids=IDS)
@pytest.mark.parametrize("empty", [b"", b" \n\t\r\n "], ids=["empty", "whitespace"])
def test_empty_input_is_a_parse_error(
    parser: BaseParser, filename: str, mime_type: str, data: bytes, empty: bytes
) -> None:
    with pytest.raises(ParseError, match=r"^Cannot parse "):
        parser.parse(empty, filename=filename)


@pytest.mark.parametrize(("parser", "filename", "mime_type", "data"), SAMPLES, ids=IDS)
def test_sections_carry_structure(
    parser: BaseParser, filename: str, mime_type: str, data: bytes
) -> None:
    document = parser.parse(data, filename=filename)

    if isinstance(parser, TextParser):
        assert document.sections == ()
    else:
        assert len(document.sections) >= 2
        assert any(section.heading_path or section.page for section in document.sections)


_bytes_like_documents = st.one_of(
    st.binary(max_size=200),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200).map(str.encode),
    st.text(alphabet='{}[]",:0123456789 \n\t\r#*-_`<>/=!&;.~abc\xe9\u2028', max_size=200).map(
        str.encode
    ),
)


@pytest.mark.parametrize(
    ("parser", "filename"), [(parser, filename) for parser, filename, *_ in SAMPLES], ids=IDS
)
@pytest.mark.filterwarnings("ignore::bs4.MarkupResemblesLocatorWarning")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(noise=_bytes_like_documents)
def test_any_bytes_give_a_well_formed_document_or_a_parse_error(
    parser: BaseParser, filename: str, noise: bytes
) -> None:
    try:
        document = parser.parse(noise, filename=filename)
    except ParseError:
        return
    assert document.text
    assert_well_formed(document)
