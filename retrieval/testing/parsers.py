"""The parser suite: bytes of one format to normalised text with its structure, or a ParseError.

Each parser is checked on a valid sample of its format (``sample``) and, with
hypothesis, on arbitrary bytes: any input gives a well-formed document or a
:class:`~retrieval.exceptions.ParseError`, never another exception.
"""

from __future__ import annotations

from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.types import ParsedDocument
from retrieval.testing.base import Suite

__all__ = ["ParserSuite", "assert_well_formed"]


def assert_well_formed(document: ParsedDocument) -> None:
    """Fail unless the text is normalised and the sections are ordered, disjoint line spans
    (one that continues the section before it under the same headings)."""
    text = document.text
    assert text == text.strip()
    assert "\n\n\n" not in text
    assert all(line == line.rstrip() for line in text.split("\n"))
    previous_end = 0
    previous_path: tuple[str, ...] | None = None
    for section in document.sections:
        assert previous_end <= section.start < section.end <= len(text), section
        assert section.start == 0 or text[section.start - 1] == "\n", section
        span = text[section.start : section.end]
        assert span.strip() and span == span.rstrip(), section  # may start with indentation
        assert section.page is None or section.page >= 1
        assert all(heading.strip() for heading in section.heading_path), section
        # A section goes on from the one before only under the same headings.
        assert not section.continues or previous_path == section.heading_path, section
        previous_end, previous_path = section.end, section.heading_path


NOISE = st.one_of(
    st.binary(max_size=200),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200).map(str.encode),
    st.text(alphabet='{}[]",:0123456789 \n\t\r#*-_`<>/=!&;.~abc\xe9\u2028', max_size=200).map(
        str.encode
    ),
)


class ParserSuite(Suite):
    """The ``BaseParser`` contract. Define :meth:`make_parser` and ``sample``."""

    #: A valid document of the parser's format: (file name, MIME type, bytes).
    sample: ClassVar[tuple[str, str, bytes]]
    #: Whether the sample's document has sections (headings or pages).
    structured: ClassVar[bool] = True

    def make_parser(self) -> BaseParser:
        raise NotImplementedError("Return the parser under test.")

    def test_the_sample_parses_to_a_well_formed_document(self) -> None:
        filename, _, data = self.sample
        document = self.make_parser().parse(data, filename=filename)
        assert document.text and document.title
        assert_well_formed(document)

    def test_the_sample_parses_without_a_file_name(self) -> None:
        filename, _, data = self.sample
        parser = self.make_parser()
        assert parser.parse(data).text == parser.parse(data, filename=filename).text

    def test_a_path_or_text_parses_as_its_bytes(self, tmp_path) -> None:
        filename, _, data = self.sample
        parser = self.make_parser()
        expected = parser.parse(data, filename=filename)
        path = tmp_path / filename
        path.write_bytes(data)
        assert parser.parse(path) == expected  # the path's name is the file name
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return  # a binary format (PDF) has no text form
        assert parser.parse(text, filename=filename) == expected

    def test_it_accepts_its_mime_type_and_extension(self) -> None:
        filename, mime_type, _ = self.sample
        parser = self.make_parser()
        assert parser.accepts(mime_type=mime_type)
        assert parser.accepts(mime_type=f"{mime_type.upper()}; charset=utf-8")
        assert parser.accepts(filename=f"/some/dir/{filename.upper()}")
        assert not parser.accepts(mime_type="application/zip", filename="archive.zip")
        assert parser.default_mime_type == mime_type
        assert all(ext.startswith(".") and ext == ext.lower() for ext in parser.extensions)
        assert all(mime == mime.lower() for mime in parser.mime_types)

    @pytest.mark.parametrize("empty", [b"", b" \n\t\r\n "], ids=["empty", "whitespace"])
    def test_empty_input_is_a_parse_error(self, empty: bytes) -> None:
        with pytest.raises(ParseError, match=r"^Cannot parse "):
            self.make_parser().parse(empty, filename=self.sample[0])

    def test_sections_carry_structure(self) -> None:
        filename, _, data = self.sample
        document = self.make_parser().parse(data, filename=filename)
        if not self.structured:
            assert document.sections == ()
            return
        assert len(document.sections) >= 2
        assert any(section.heading_path or section.page for section in document.sections)

    @pytest.mark.filterwarnings("ignore::bs4.MarkupResemblesLocatorWarning")
    @settings(
        max_examples=150,
        deadline=None,
        # Each subclass runs this test on its own parser (see testing.chunkers).
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
    )
    @given(noise=NOISE)
    def test_any_bytes_give_a_well_formed_document_or_a_parse_error(self, noise: bytes) -> None:
        try:
            document = self.make_parser().parse(noise, filename=self.sample[0])
        except ParseError:
            return
        assert document.text
        assert_well_formed(document)
