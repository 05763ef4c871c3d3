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
from retrieval.services.types import ParsedDocument


class TextParser(BaseParser):
    """Read plain text: UTF-8 or UTF-16 with a BOM, else UTF-8, else cp1252."""

    mime_types: ClassVar[tuple[str, ...]] = ("text/plain",)
    extensions: ClassVar[tuple[str, ...]] = (".txt", ".text", ".log", ".rst")

    def parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the file's text with newlines normalised; the title is its first line."""
        decoded, encoding = decode_text(data, filename=filename)
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
