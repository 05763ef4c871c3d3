"""Text assembly shared by every parser: decoding, titles, and a builder of text with sections."""

from __future__ import annotations

import codecs
import re
from dataclasses import replace
from pathlib import PurePath

from retrieval.exceptions import ParseError
from retrieval.services.types import Section

TITLE_MAX_CHARS = 200

_WHITESPACE = re.compile(r"\s+")
#: A word that opens a list item: a bullet or dash, or a number or letter and a stop.
LIST_MARKER = re.compile(
    r"[\u2022\u00b7\u2023\u25e6\u2043\u2219\u25aa\u25cf*\-\u2013]|\d{1,3}[.)]|[a-z][.)]"
)
_NEWLINES = re.compile(r"\r\n?")
# A BOM settles the encoding; UTF-32 comes first because its LE BOM starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Control bytes that never appear in text (tab, newlines, form feed and escape do).
_CONTROL_BYTES = bytes([*range(0, 8), *range(14, 27), *range(28, 32), 127])
_TEXT_BYTES = bytes(b for b in range(256) if b not in _CONTROL_BYTES)
_BINARY_SAMPLE_BYTES = 8192
_BINARY_CONTROL_RATIO = 0.1


def file_label(filename: str | None) -> str:
    """Return how error messages name the file."""
    return repr(PurePath(filename).name) if filename else "the file"


def stem_title(filename: str | None) -> str:
    """Return the file name without its extension, the title of last resort."""
    return PurePath(filename).stem if filename else ""


def clip_title(text: str) -> str:
    """Return ``text`` on one line, trimmed to at most ``TITLE_MAX_CHARS``."""
    return _WHITESPACE.sub(" ", text).strip()[:TITLE_MAX_CHARS].rstrip()


def first_line(text: str) -> str:
    """Return the first non-empty line of ``text``, clipped as a title."""
    for line in text.split("\n"):
        if line.strip():
            return clip_title(line)
    return ""


def nest_heading(stack: list[tuple[int, str]], level: int, heading: str) -> tuple[str, ...]:
    """Put ``heading`` at ``level`` on ``stack`` and return the enclosing heading path."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    stack.append((level, heading))
    return tuple(title for _, title in stack)


def decode_text(data: bytes, *, filename: str | None = None) -> tuple[str, str]:
    """Return ``data`` decoded, and the encoding used: BOM, else UTF-8, else cp1252."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace"), encoding
    if _looks_binary(data):
        raise ParseError(f"Cannot parse {file_label(filename)}: it looks like a binary file.")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace"), "cp1252"


def _looks_binary(data: bytes) -> bool:
    if b"\x00" in data:
        return True
    sample = data[:_BINARY_SAMPLE_BYTES]
    controls = len(sample.translate(None, _TEXT_BYTES))
    return controls > len(sample) * _BINARY_CONTROL_RATIO


class TextBuilder:
    """Assemble normalised text piece by piece, recording sections as it goes.

    The result never starts or ends with whitespace, no line ends with whitespace,
    blank lines never come two in a row, and every section starts at a line start
    and ends at its last character.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._breaks = 0  # newlines owed before the next text, at most two
        self._separator = ""  # owed before the next text if it lands on the same line
        self._line_has_text = False
        self._joined = False  # block breaks are line breaks until the next text
        self._sections: list[Section] = []
        self._pending: Section | None = None  # opened, waiting for its first text
        self._current: Section | None = None  # has text; its end is still open

    def line_break(self) -> None:
        """End the current line."""
        if self._length:
            self._breaks = max(self._breaks, 1)

    def block_break(self) -> None:
        """End the current block: the next text follows a blank line (a new line if joined)."""
        if self._length:
            self._breaks = max(self._breaks, 1) if self._joined else 2

    def join_blocks(self, joined: bool) -> None:
        """While ``joined`` and until the next text, a block break only ends the line
        (one already owed included).

        A definition's first paragraph stays in one block with its term, so that a
        chunk boundary at a blank line never parts the two.
        """
        self._joined = joined
        if joined and self._breaks:
            self._breaks = 1

    def separate(self, separator: str) -> None:
        """Put ``separator`` before the next text if it continues this line."""
        if self._line_has_text and not self._breaks:
            self._separator = separator

    def write(self, text: str) -> None:
        """Append inline text, collapsing each run of whitespace to one space."""
        collapsed = _WHITESPACE.sub(" ", text)
        if collapsed.startswith(" "):
            self.separate(self._separator or " ")
        words = collapsed.strip(" ")
        if words:
            self._emit(words)
            if collapsed.endswith(" "):
                self.separate(" ")

    def write_lines(self, text: str) -> None:
        """Append text line by line, keeping each line's indentation."""
        for index, line in enumerate(_NEWLINES.sub("\n", text).split("\n")):
            if index and self._length:
                self._breaks = min(self._breaks + 1, 2)
            line = line.rstrip()
            if line:
                self._emit(line)

    def open_section(
        self,
        *,
        heading_path: tuple[str, ...] = (),
        page: int | None = None,
        continues: bool = False,
    ) -> None:
        """Start a section at the next line that gets text.

        ``continues``: it goes on from the section before (see :class:`Section`), if that
        one has the same heading path.
        """
        self.line_break()
        self._close_section()
        continues = continues and bool(self._sections)
        continues = continues and self._sections[-1].heading_path == heading_path
        self._pending = Section(0, 0, page, heading_path, continues)

    def build(self) -> tuple[str, tuple[Section, ...]]:
        """Return the text and its sections."""
        self._close_section()
        return "".join(self._parts), tuple(self._sections)

    def _emit(self, text: str) -> None:
        if not self._length:
            text = text.lstrip()
            prefix = ""
        elif self._breaks:
            prefix = "\n" * self._breaks
        else:
            prefix = self._separator
        self._parts.append(prefix)
        self._length += len(prefix)
        if self._pending is not None:
            self._current = replace(self._pending, start=self._length)
            self._pending = None
        self._parts.append(text)
        self._length += len(text)
        self._breaks = 0
        self._separator = ""
        self._line_has_text = True
        self._joined = False

    def _close_section(self) -> None:
        if self._current is not None:
            self._sections.append(replace(self._current, end=self._length))
        self._current = None
        self._pending = None
