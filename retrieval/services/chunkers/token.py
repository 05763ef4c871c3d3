"""Fixed-size token windows, cut only between characters."""

from __future__ import annotations

from collections.abc import Sequence

import tiktoken

from retrieval.services.chunkers.base import BaseChunker, require_int
from retrieval.services.chunkers.character import drop_contained, skip_space, trim
from retrieval.services.clients.tokens import count_tokens, token_boundaries
from retrieval.services.types import ChunkSpan, Section

__all__ = ["MIN_MAX_TOKENS", "TokenChunker", "split_by_tokens", "validate_encoding_name"]

# One code point is at most 4 UTF-8 bytes, so at most 4 tokens: a smaller budget
# could not always hold a chunk without cutting a character.
MIN_MAX_TOKENS = 4

_MIN_BLOCK_CHARS = 65_536


class TokenChunker(BaseChunker):
    """Split text into windows of at most ``max_tokens`` tokens, ``overlap`` shared.

    Tokens are tiktoken's ``encoding``.
    """

    def __init__(
        self, max_tokens: int = 256, overlap: int = 32, encoding: str = "cl100k_base"
    ) -> None:
        require_int("max_tokens", max_tokens, low=MIN_MAX_TOKENS)
        require_int("overlap", overlap, low=0, high=max_tokens - 1, high_name="max_tokens - 1")
        validate_encoding_name(encoding)
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.encoding = encoding

    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        """Return token windows over ``text``; ``sections`` are ignored."""
        spans = split_by_tokens(
            text,
            0,
            len(text),
            max_tokens=self.max_tokens,
            overlap=self.overlap,
            encoding=self.encoding,
        )
        return [ChunkSpan(start, end) for start, end, _ in spans]


def validate_encoding_name(encoding: str) -> None:
    """Raise ``ValueError`` unless tiktoken knows ``encoding`` (without loading it)."""
    names = tiktoken.list_encoding_names()
    if encoding not in names:
        raise ValueError(f"encoding must be one of {', '.join(names)}, got {encoding!r}.")


def split_by_tokens(
    text: str,
    start: int,
    end: int,
    *,
    max_tokens: int,
    overlap: int,
    encoding: str,
    word_ends: bool = False,
) -> list[tuple[int, int, int]]:
    """Return ``(start, end, token_count)`` windows over ``text[start:end]``.

    Each window, encoded on its own, has at most ``max_tokens`` tokens; windows
    that would exceed it (tokens merge differently at the edges) are shortened.
    With ``word_ends``, a window ends at a word boundary when it holds one.
    """
    spans: list[tuple[int, int, int]] = []
    # Encode block by block: BPE slows down on very long runs without whitespace.
    block_length = max(_MIN_BLOCK_CHARS, 64 * max_tokens)
    position = skip_space(text, start, end)
    while position < end:
        block_end = min(end, position + block_length)
        block = text[position:block_end]
        offsets = [position + offset for offset in token_boundaries(block, encoding)]
        emitted = len(spans)
        windows = _Windows(text, offsets, max_tokens, overlap, encoding, word_ends)
        resume = windows.add_to(spans, is_last_block=block_end == end)
        if resume is None:
            break
        if resume <= position:  # no whole window fits in this block
            del spans[emitted:]
            block_length *= 2
            continue
        position = skip_space(text, resume, end)
    counts = {(start, end): count for start, end, count in spans}
    kept = drop_contained((start, end) for start, end, _ in spans)
    return [(start, end, counts[start, end]) for start, end in kept]


class _Windows:
    """Windows over the tokens of one block, whose token ``i`` starts at ``offsets[i]``."""

    def __init__(
        self,
        text: str,
        offsets: list[int],
        max_tokens: int,
        overlap: int,
        encoding: str,
        word_ends: bool,
    ) -> None:
        self.text = text
        self.offsets = offsets
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.encoding = encoding
        self.word_ends = word_ends

    def add_to(self, spans: list[tuple[int, int, int]], *, is_last_block: bool) -> int | None:
        """Append the block's windows to ``spans``; return the offset to continue from.

        ``None`` means the text is done. The window reaching the end of a block
        that is not the last is left to the next block, since the block's end may
        cut a token.
        """
        text, offsets, max_tokens = self.text, self.offsets, self.max_tokens
        token_total = len(offsets) - 1
        first = 0
        while first < token_total:
            last = min(first + max_tokens, token_total)
            if last == token_total and not is_last_block:
                return offsets[first]
            if last < token_total:
                last = self._word_end(first, last)
            window_end = None
            while True:
                start, end = trim(text, offsets[first], offsets[last])
                if start >= end:
                    break
                count = count_tokens(text[start:end], self.encoding)
                if count <= max_tokens:
                    spans.append((start, end, count))
                    window_end = end
                    break
                if last - first > 1:
                    last = self._word_end(first, max(first + 1, last - (count - max_tokens)))
                    continue
                start, end, count = _longest_fitting_prefix(
                    text, start, end, max_tokens, self.encoding
                )
                spans.append((start, end, count))
                return end
            if last >= token_total:
                return None
            first = self._next_first(first, last, window_end)
        return None

    def _next_first(self, first: int, last: int, window_end: int | None) -> int:
        """Return the token the next window starts at, sharing at most ``overlap`` tokens.

        The shared text is counted on its own: when it starts inside a character
        (the character is then shared whole) or tokenizes differently, it shrinks.
        """
        following = max(last - self.overlap, first + 1)
        if not self.overlap or window_end is None:
            return following
        while following < last:
            shared_start = skip_space(self.text, self.offsets[following], window_end)
            if shared_start >= window_end:
                break
            shared = self.text[shared_start:window_end]
            if count_tokens(shared, self.encoding) <= self.overlap:
                break
            following += 1
        return following

    def _word_end(self, first: int, last: int) -> int:
        """Return the last token boundary in ``(first, last]`` between words, else ``last``."""
        if not self.word_ends:
            return last
        text, offsets = self.text, self.offsets
        for boundary in range(last, first, -1):
            offset = offsets[boundary]
            if offset <= offsets[first]:
                break
            if offset == len(text) or text[offset].isspace() or text[offset - 1].isspace():
                return boundary
        return last


def _longest_fitting_prefix(
    text: str, start: int, end: int, max_tokens: int, encoding: str
) -> tuple[int, int, int]:
    # text[start] is one non-space code point, so it alone fits in MIN_MAX_TOKENS.
    fits, too_long = start + 1, end
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if count_tokens(text[start : trim(text, start, middle)[1]], encoding) <= max_tokens:
            fits = middle
        else:
            too_long = middle
    end = trim(text, start, fits)[1]
    return start, end, count_tokens(text[start:end], encoding)
