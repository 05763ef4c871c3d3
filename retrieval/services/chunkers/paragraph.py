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

    A paragraph longer than ``max_chars`` is cut into character windows. With
    ``overlap=n``, a chunk begins with the last ``n`` paragraphs of the chunk before it
    (as many as fit within ``max_chars``), so a passage cut between chunks is whole in one.
    """

    def __init__(self, max_chars: int = 2000, overlap: int = 0) -> None:
        require_int("max_chars", max_chars, low=1)
        require_int("overlap", overlap, low=0)
        self.max_chars = max_chars
        self.overlap = overlap

    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        """Return paragraph groups of ``text``; ``sections`` are ignored."""
        groups: list[list[tuple[int, int]]] = []  # each a run of paragraphs, or one window
        group: list[tuple[int, int]] = []
        for start, end in split_at(PARAGRAPH_BREAK, text, 0, len(text)):
            if group and end - group[0][0] <= self.max_chars:
                group.append((start, end))
                continue
            if group:
                groups.append(group)
                group = []
            if end - start <= self.max_chars:
                group = [(start, end)]
            else:
                groups.extend([window] for window in split_by_characters(
                    text, start, end, size=self.max_chars
                ))  # fmt: skip
        if group:
            groups.append(group)
        spans = [(g[0][0], g[-1][1]) for g in groups]
        if self.overlap:
            for i in range(1, len(groups)):
                carried = groups[i - 1][-self.overlap :]
                while carried and spans[i][1] - carried[0][0] > self.max_chars:
                    carried = carried[1:]
                if carried and carried[0][0] > spans[i - 1][0]:
                    spans[i] = (carried[0][0], spans[i][1])
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
