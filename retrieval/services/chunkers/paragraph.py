"""Paragraphs, merged up to a character budget."""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrieval.services.chunkers.base import BaseChunker, require_int
from retrieval.services.chunkers.character import split_by_characters, trim
from retrieval.services.types import ChunkSpan, Section

__all__ = ["PARAGRAPH_BREAK", "ParagraphChunker", "split_at"]

# A blank line: a line break, whitespace-only lines, another line break.
PARAGRAPH_BREAK = re.compile(r"\n\s*\n|\u2029")


class ParagraphChunker(BaseChunker):
    """Merge consecutive paragraphs into chunks of at most ``max_chars`` characters.

    A paragraph longer than ``max_chars`` is cut into character windows.
    """

    def __init__(self, max_chars: int = 2000) -> None:
        require_int("max_chars", max_chars, low=1)
        self.max_chars = max_chars

    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        """Return paragraph groups of ``text``; ``sections`` are ignored."""
        spans: list[tuple[int, int]] = []
        group: tuple[int, int] | None = None
        for start, end in split_at(PARAGRAPH_BREAK, text, 0, len(text)):
            if group is not None and end - group[0] <= self.max_chars:
                group = (group[0], end)
                continue
            if group is not None:
                spans.append(group)
                group = None
            if end - start <= self.max_chars:
                group = (start, end)
            else:
                spans.extend(split_by_characters(text, start, end, size=self.max_chars))
        if group is not None:
            spans.append(group)
        return [ChunkSpan(start, end) for start, end in spans]


def split_at(separator: re.Pattern[str], text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Return the trimmed, non-empty pieces of ``text[start:end]`` between ``separator`` matches."""
    pieces: list[tuple[int, int]] = []
    piece_start = start
    for match in separator.finditer(text, start, end):
        piece = trim(text, piece_start, match.start())
        if piece[0] < piece[1]:
            pieces.append(piece)
        piece_start = match.end()
    piece = trim(text, piece_start, end)
    if piece[0] < piece[1]:
        pieces.append(piece)
    return pieces
