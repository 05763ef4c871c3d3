"""Plain text files."""

from __future__ import annotations

from typing import ClassVar

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.layout import (
    TextBuilder,
    decode_text,
    file_label,
    first_line,
    stem_title,
)
from retrieval.services.parsers.rst import looks_like_rst, parse_rst
from retrieval.services.types import ParsedDocument


class TextParser(BaseParser):
    """Read plain text: UTF-8 or UTF-16 with a BOM, else UTF-8, else cp1252.

    Many projects write reStructuredText in ``.txt`` files; such text gets its sections.
    """

    mime_types: ClassVar[tuple[str, ...]] = ("text/plain",)
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".text", ".log")

    def __init__(self, detect_rst: bool = True) -> None:
        self.detect_rst = detect_rst

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the file's text with newlines normalised; the title is its first line.

        Text that is recognisably reStructuredText (section titles with their
        adornments) is read as reST, with sections, unless ``detect_rst`` is off.
        """
        decoded, encoding = decode_text(data, filename=filename)
        if self.detect_rst and looks_like_rst(decoded):
            parsed = parse_rst(decoded, filename=filename)
            return ParsedDocument(
                text=parsed.text,
                title=parsed.title,
                sections=parsed.sections,
                metadata={"encoding": encoding, "format": "rst"},
            )
        builder = TextBuilder()
        builder.write_lines(decoded)
        text, _ = builder.build()
        if not text:
            raise ParseError(f"Cannot parse {file_label(filename)}: it has no text.")
        return ParsedDocument(
            text=text,
            title=first_line(text) or stem_title(filename),
            metadata={"encoding": encoding},
        )
