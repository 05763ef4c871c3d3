"""TextParser decoding and normalisation, and the TextBuilder every parser uses."""

from __future__ import annotations

import codecs

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.exceptions import ParseError
from retrieval.services.parsers.layout import TextBuilder
from retrieval.services.parsers.text import TextParser
from retrieval.services.types import ParsedDocument, Section
from retrieval.testing.parsers import assert_well_formed


def parse(data: bytes, filename: str | None = "notes.txt") -> ParsedDocument:
    return TextParser().parse(data, filename=filename)


def test_utf8_bom_is_stripped() -> None:
    document = parse(codecs.BOM_UTF8 + "Zoë’s notes\nline two".encode())

    assert document.text == "Zoë’s notes\nline two"
    assert document.title == "Zoë’s notes"


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_bom_is_decoded(codec: str) -> None:
    bom = codecs.BOM_UTF16_BE if codec.endswith("be") else codecs.BOM_UTF16_LE
    data = "Привет, мир\nsecond line".encode(codec)
    if codec != "utf-16":  # the plain codec writes its own BOM
        data = bom + data

    assert parse(data).text == "Привет, мир\nsecond line"


def test_invalid_utf8_falls_back_to_cp1252() -> None:
    document = parse("Café “quoted” – €5".encode("cp1252"))

    assert document.text == "Café “quoted” – €5"
    assert document.metadata["encoding"] == "cp1252"


def test_valid_utf8_is_read_as_utf8() -> None:
    document = parse("Café ✓".encode())

    assert document.text == "Café ✓"
    assert document.metadata["encoding"] == "utf-8"


@pytest.mark.parametrize(
    "data",
    [b"PK\x03\x04\x14\x00\x00\x00text", b"GIF89a" + bytes(range(1, 9)) * 20],
    ids=["nul-bytes", "control-bytes"],
)
def test_binary_data_is_a_parse_error(data: bytes) -> None:
    with pytest.raises(ParseError, match="'notes.txt'.*binary"):
        parse(data)


@pytest.mark.parametrize("data", [b"", b"   ", b"\r\n\t\n", codecs.BOM_UTF8 + b"\n "])
def test_no_text_is_a_parse_error(data: bytes) -> None:
    with pytest.raises(ParseError, match="no text"):
        parse(data)


def test_newlines_blank_lines_and_trailing_spaces_are_normalised() -> None:
    document = parse(b"\r\n\r\n  Title  \r\n\r\n\r\n\r\n    indented   \rlast\t\r\n\r\n")

    assert document.text == "Title\n\n    indented\nlast"
    assert document.title == "Title"
    assert_well_formed(document)


def test_title_is_first_line_clipped_to_200_characters() -> None:
    long_line = " ".join(["word"] * 100)

    title = parse(f"\n\n{long_line}\nbody".encode()).title

    assert len(title) <= 200
    assert long_line.startswith(title)


@pytest.mark.parametrize("filename", ["a.txt", "a.TEXT", "server.log"])
def test_accepts_text_extensions(filename: str) -> None:
    assert TextParser().accepts(filename=filename)


def test_does_not_accept_markdown() -> None:
    assert not TextParser().accepts(mime_type="text/markdown", filename="a.md")


def test_builder_collapses_inline_whitespace_and_records_sections() -> None:
    builder = TextBuilder()
    builder.open_section()
    builder.write("  lead   in  ")
    builder.write("\n next ")
    builder.block_break()
    builder.open_section(heading_path=("H",), page=2)
    builder.write("Heading")
    builder.separate(" | ")
    builder.write("cell")
    builder.line_break()
    builder.write_lines("  code\n\n\n\n  more  ")

    text, sections = builder.build()

    assert text == "lead in next\n\nHeading | cell\n  code\n\n  more"
    assert sections == (
        Section(0, 12, None, ()),
        Section(14, len(text), 2, ("H",)),
    )


def test_builder_drops_sections_without_text() -> None:
    builder = TextBuilder()
    builder.open_section(heading_path=("Empty",))
    builder.write("   ")
    builder.open_section(heading_path=("Full",))
    builder.write("x")

    assert builder.build() == ("x", (Section(0, 1, None, ("Full",)),))


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.text(alphabet=" \t\n\r\xa0ab|", max_size=8)),
        st.tuples(st.just("write_lines"), st.text(alphabet=" \t\n\r\xa0ab", max_size=12)),
        st.tuples(st.just("separate"), st.sampled_from([" ", " | "])),
        st.tuples(st.just("line_break"), st.none()),
        st.tuples(st.just("block_break"), st.none()),
        st.tuples(st.just("open_section"), st.sampled_from(["A", "B"])),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(_operations)
def test_builder_output_is_always_well_formed(operations: list[tuple[str, str | None]]) -> None:
    builder = TextBuilder()
    for name, argument in operations:
        if name == "open_section":
            builder.open_section(heading_path=(str(argument),))
        elif argument is None:
            getattr(builder, name)()
        else:
            getattr(builder, name)(argument)

    text, sections = builder.build()

    assert_well_formed(ParsedDocument(text=text, sections=sections))
    assert all(text[section.start : section.end] for section in sections)
