"""Fixed-size character windows, ending at whitespace where possible.

Also home to the span helpers the other chunkers share: trimming whitespace off
span edges and dropping spans that another span contains.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from retrieval.services.chunkers.base import BaseChunker, require_int
from retrieval.services.types import ChunkSpan, Section

__all__ = ["CharacterChunker", "drop_contained", "skip_space", "split_by_characters", "trim"]

_NON_SPACE = re.compile(r"\S")

# A window may end this early (as a share of its size) to end at whitespace.
_WHITESPACE_SEARCH_SHARE = 0.2


class CharacterChunker(BaseChunker):
    """Split text into windows of at most ``size`` characters, ``overlap`` shared."""

    def __init__(self, size: int = 1000, overlap: int = 200) -> None:
        require_int("size", size, low=1)
        require_int("overlap", overlap, low=0, high=size - 1, high_name="size - 1")
        self.size = size
        self.overlap = overlap

    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        """Return windows over ``text``; ``sections`` are ignored."""
        spans = split_by_characters(text, 0, len(text), size=self.size, overlap=self.overlap)
        return [ChunkSpan(start, end) for start, end in spans]


def split_by_characters(
    text: str, start: int, end: int, *, size: int, overlap: int = 0
) -> list[tuple[int, int]]:
    """Return windows of at most ``size`` characters over ``text[start:end]``.

    A window ends at the last whitespace in its final fifth when there is some;
    the next window starts ``overlap`` characters before the previous one ended,
    moved forward to a word start if one lies within the overlap.
    """
    spans: list[tuple[int, int]] = []
    search_length = max(1, int(size * _WHITESPACE_SEARCH_SHARE))
    position = skip_space(text, start, end)
    while position < end:
        cut = min(position + size, end)
        if cut < end and not text[cut].isspace():
            for candidate in range(cut - 1, max(position, cut - search_length - 1), -1):
                if text[candidate].isspace():
                    cut = candidate
                    break
        span_end = _trim_end(text, position, cut)
        spans.append((position, span_end))
        if cut >= end:
            break
        next_start = max(span_end - overlap, position + 1) if overlap else cut
        if next_start < span_end:
            position = _overlap_start(text, next_start, span_end)
        else:
            position = skip_space(text, next_start, end)
    return drop_contained(spans)


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Return ``(start, end)`` moved inward past whitespace; ``start >= end`` if none is left."""
    start = skip_space(text, start, end)
    return start, _trim_end(text, start, end)


def skip_space(text: str, start: int, end: int) -> int:
    """Return the first non-whitespace offset in ``text[start:end]``, else ``end``."""
    match = _NON_SPACE.search(text, start, end)
    return match.start() if match else end


def drop_contained(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Return spans sorted by start with every span another one contains left out."""
    kept: list[tuple[int, int]] = []
    for start, end in spans:
        if kept and end <= kept[-1][1]:
            continue
        if kept and start == kept[-1][0]:
            kept[-1] = (start, end)
        else:
            kept.append((start, end))
    return kept


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def _overlap_start(text: str, start: int, previous_end: int) -> int:
    # Prefer to begin on a word; stay mid-word when the overlap holds no whitespace.
    if start > 0 and not text[start - 1].isspace():
        for offset in range(start, previous_end):
            if text[offset].isspace():
                return skip_space(text, offset, previous_end)
    return skip_space(text, start, previous_end)
