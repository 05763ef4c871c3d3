"""Structure-aware chunks: sections, then paragraphs, lines, sentences, words, tokens."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from itertools import pairwise

from retrieval.services.chunkers.base import BaseChunker, require_int
from retrieval.services.chunkers.character import skip_space, trim
from retrieval.services.chunkers.paragraph import PARAGRAPH_BREAK, split_at
from retrieval.services.chunkers.token import (
    MIN_MAX_TOKENS,
    split_by_tokens,
    validate_encoding_name,
)
from retrieval.services.clients.tokens import (
    count_tokens,
    longest_token_bytes,
    token_boundaries,
)
from retrieval.services.types import ChunkSpan, Section

__all__ = ["RecursiveChunker", "only_heading"]

# Tried in order, each only inside a piece still over budget; then token windows
# that end between words where they can.
_SEPARATORS = (
    PARAGRAPH_BREAK,
    re.compile(r"[\n\r\x0b\x0c\x85\u2028]"),
    re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])"),  # after . ! ? (and 。！？)
)

_LINE_BREAK = re.compile(r"[\n\r\x0b\x0c\x85\u2028\u2029]")

Piece = tuple[int, int, int]  # start, end, token count


class RecursiveChunker(BaseChunker):
    """Split text at the coarsest structure that brings pieces within ``max_tokens``.

    A section boundary (and the edge of text outside any section) ends a chunk,
    except after a section that is only its heading (a chapter heading followed at
    once by its first subsection). A section's heading line, and any bare headings
    before it, begin the first chunk of the section's text (that chunk's text is split
    smaller to make room), so no chunk is a bare heading unless no text follows.
    Inside a section, a piece over budget is split at blank lines, then
    line breaks, then sentence ends, then into token windows that end between
    words (mid-word only for a single word over budget). Neighbouring pieces of
    one split that fit together are merged greedily, and a chunk under
    ``min_tokens`` joins its predecessor when the pair fits. With
    ``overlap_tokens``, a chunk also starts with up to that many tokens from the
    end of the chunk before it in the same section; chunks are then built within
    ``max_tokens - overlap_tokens`` to leave room for it. With ``pack_sections``, a
    chunk that ends at a section boundary continues into the next section when
    either holds fewer than that many tokens and the two fit together: a run of
    short sections (release notes, reference entries) makes chunks of a useful size
    instead of one scrap each. Tokens are counted with tiktoken's ``encoding``.
    """

    def __init__(
        self,
        max_tokens: int = 256,
        overlap_tokens: int = 0,
        encoding: str = "cl100k_base",
        min_tokens: int = 32,
        pack_sections: int = 0,
    ) -> None:
        require_int("max_tokens", max_tokens, low=MIN_MAX_TOKENS)
        require_int(
            "overlap_tokens", overlap_tokens, low=0, high=max_tokens - 1, high_name="max_tokens - 1"
        )
        require_int("min_tokens", min_tokens, low=0)
        require_int("pack_sections", pack_sections, low=0)
        validate_encoding_name(encoding)
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.encoding = encoding
        self.min_tokens = min_tokens
        self.pack_sections = pack_sections
        # Leave room for the overlap that is prepended afterwards.
        self._budget = max(max_tokens - overlap_tokens, MIN_MAX_TOKENS)

    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        """Return the chunk spans of ``text``, none crossing a boundary of ``sections``
        except after a section that holds nothing but its heading (that heading starts
        the first chunk of the text after it) and into a section that continues the one
        before it."""
        spans: list[ChunkSpan] = []
        headings = {section.start: section.heading_path for section in sections}
        lead: tuple[int, int] | None = None  # heading-only text waiting for what follows
        for region_start, region_end in _regions(text, sections):
            start, end = trim(text, region_start, region_end)
            if start >= end:
                continue
            heading_end = _heading_end(text, start, end, headings.get(region_start, ()))
            if heading_end == end:
                lead = (lead[0] if lead else start, end)
                continue
            if heading_end:  # the heading leads the first chunk of its section's text
                lead = (lead[0] if lead else start, heading_end)
                start = skip_space(text, heading_end, end)
            spans.extend(self._region(text, start, end, lead[0] if lead else None))
            lead = None
        if lead:  # headings with no text after them
            spans.extend(self._region(text, *lead, None))
        return self._pack(text, spans) if self.pack_sections else spans

    def _pack(self, text: str, spans: list[ChunkSpan]) -> list[ChunkSpan]:
        """Join neighbouring chunks when one is under ``pack_sections`` tokens and both fit."""
        packed: list[Piece] = []
        for span in spans:
            count = self._count(text, span.start, span.end)
            if packed and packed[-1][1] <= span.start:  # never chunks that overlap
                start, _, previous = packed[-1]
                if min(previous, count) < self.pack_sections:
                    pair = self._count(text, start, span.end)
                    if pair <= self._budget:
                        packed[-1] = (start, span.end, pair)
                        continue
            packed.append((span.start, span.end, count))
        return [ChunkSpan(start, end) for start, end, _ in packed]

    def split_span(self, text: str, start: int, end: int, *, fraction: float) -> list[ChunkSpan]:
        """Split ``text[start:end]`` as :meth:`chunk` splits, within ``fraction`` of its tokens."""
        count = self._count(text, start, end)
        narrow = copy.copy(self)
        narrow._budget = max(MIN_MAX_TOKENS, min(count - 1, int(count * fraction)))
        pieces = narrow._split(text, start, end, count, 0)
        return [ChunkSpan(start, end) for start, end, _ in narrow._absorb_small(text, pieces)]

    def _region(self, text: str, start: int, end: int, lead: int | None) -> list[ChunkSpan]:
        """Chunk ``text[start:end]``; with ``lead``, the first chunk starts there instead."""
        pieces = self._split(text, start, end, self._count_up_to_budget(text, start, end), 0)
        if lead is not None:
            pieces = self._lead_with(text, lead, pieces)
        pieces = self._absorb_small(text, pieces)
        if self.overlap_tokens:
            pieces = self._add_overlap(text, pieces)
        return [ChunkSpan(start, end) for start, end, _ in pieces]

    def _lead_with(self, text: str, lead: int, pieces: list[Piece]) -> list[Piece]:
        """Start the first piece at ``lead`` (a heading), re-split smaller to make room."""
        first_start, first_end, _ = pieces[0]
        count = self._count(text, lead, first_end)
        if count <= self._budget:
            return [(lead, first_end, count), *pieces[1:]]
        room = self._budget - self._count(text, lead, first_start) - 1
        while room >= MIN_MAX_TOKENS:
            narrow = copy.copy(self)
            narrow._budget = room
            head, *rest = narrow._split(
                text, first_start, first_end, narrow._count(text, first_start, first_end), 0
            )
            count = self._count(text, lead, head[1])
            if count <= self._budget:
                return [(lead, head[1], count), *rest, *pieces[1:]]
            room -= count - self._budget
        # Headings too long to share a chunk: they keep chunks of their own.
        lead, heading_end = trim(text, lead, first_start)
        return (
            self._split(
                text, lead, heading_end, self._count_up_to_budget(text, lead, heading_end), 0
            )
            + pieces
        )

    def _count(self, text: str, start: int, end: int) -> int:
        return count_tokens(text[start:end], self.encoding)

    def _count_up_to_budget(self, text: str, start: int, end: int) -> int:
        """Return the token count of ``text[start:end]``, or budget + 1 if surely over it."""
        if end - start > self._budget * longest_token_bytes(self.encoding):
            return self._budget + 1
        return self._count(text, start, end)

    def _split(self, text: str, start: int, end: int, count: int, level: int) -> list[Piece]:
        """Return pieces of ``text[start:end]`` within budget, split from ``level`` down."""
        if count <= self._budget:
            return [(start, end, count)]
        parts: list[tuple[int, int]] = []
        while level < len(_SEPARATORS) and len(parts) < 2:
            parts = split_at(_SEPARATORS[level], text, start, end)
            level += 1
        if len(parts) < 2:
            return split_by_tokens(
                text,
                start,
                end,
                max_tokens=self._budget,
                overlap=0,
                encoding=self.encoding,
                word_ends=True,
            )
        pieces: list[Piece] = []
        fitting: list[Piece] = []
        for part_start, part_end in parts:
            part_count = self._count_up_to_budget(text, part_start, part_end)
            if part_count <= self._budget:
                fitting.append((part_start, part_end, part_count))
                continue
            pieces.extend(self._merge(text, fitting))
            fitting = []
            pieces.extend(self._split(text, part_start, part_end, part_count, level))
        pieces.extend(self._merge(text, fitting))
        return pieces

    def _merge(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """Merge runs of neighbouring pieces greedily while they fit the budget.

        Runs are sized from the pieces' own counts (plus one per line break between
        them), then each merged span is counted exactly and cut back if it overshoots.
        """
        merged: list[Piece] = []
        first = 0
        while first < len(pieces):
            estimate = pieces[first][2]
            after = first + 1
            while after < len(pieces):
                gap = text[pieces[after - 1][1] : pieces[after][0]]
                step = pieces[after][2] + ("\n" in gap)
                if estimate + step > self._budget:
                    break
                estimate += step
                after += 1
            if after - first == 1:
                merged.append(pieces[first])
            else:
                after = self._longest_fitting_run(text, pieces, first, after)
                start, end = pieces[first][0], pieces[after - 1][1]
                merged.append((start, end, self._count(text, start, end)))
            first = after
        return merged

    def _longest_fitting_run(self, text: str, pieces: list[Piece], first: int, after: int) -> int:
        """Return the largest ``after`` such that ``pieces[first:after]`` fits when merged."""
        start = pieces[first][0]
        if self._count(text, start, pieces[after - 1][1]) <= self._budget:
            return after
        fits, too_long = first + 1, after  # a single piece always fits
        while too_long - fits > 1:
            middle = (fits + too_long) // 2
            if self._count(text, start, pieces[middle - 1][1]) <= self._budget:
                fits = middle
            else:
                too_long = middle
        return fits

    def _absorb_small(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """Join each chunk under ``min_tokens`` to its predecessor when the pair fits."""
        if not self.min_tokens:
            return pieces
        joined: list[Piece] = []
        for start, end, count in pieces:
            if joined and min(count, joined[-1][2]) < self.min_tokens:
                previous_start = joined[-1][0]
                pair_count = self._count(text, previous_start, end)
                if pair_count <= self._budget:
                    joined[-1] = (previous_start, end, pair_count)
                    continue
            joined.append((start, end, count))
        return joined

    def _add_overlap(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """Start each chunk with up to ``overlap_tokens`` tokens from the end of the last."""
        overlapped = pieces[:1]
        for (previous_start, previous_end, _), (start, end, count) in pairwise(pieces):
            offsets = token_boundaries(text[previous_start:previous_end], self.encoding)
            token_total = len(offsets) - 1
            taken = min(self.overlap_tokens, token_total - 1)  # never the whole chunk
            while taken > 0:
                tail_start = _word_start(text, previous_start + offsets[-1 - taken], previous_end)
                if tail_start <= previous_start:
                    break
                # Count the tail on its own too: it may start inside a multi-token character.
                tail_count = self._count(text, tail_start, previous_end)
                total = self._count(text, tail_start, end)
                if tail_count <= self.overlap_tokens and total <= self.max_tokens:
                    start, count = tail_start, total
                    break
                taken -= max(1, tail_count - self.overlap_tokens, total - self.max_tokens)
            overlapped.append((start, end, count))
        return overlapped


def _regions(text: str, sections: Sequence[Section]) -> list[tuple[int, int]]:
    """Return the stretches of ``text`` between consecutive section boundaries (none
    between a section and the next when that one ``continues`` it)."""
    boundaries = {0, len(text)}
    joins: set[int] = set()
    previous: Section | None = None
    for section in sections:
        if not 0 <= section.start <= section.end <= len(text):
            raise ValueError(
                f"{section!r} does not fit in the text (0 <= start <= end <= {len(text)})."
            )
        boundaries.update((section.start, section.end))
        if section.continues and previous is not None:
            joins.update((previous.end, section.start))
        previous = section
    ordered = sorted(boundaries - (joins - {0, len(text)}))
    return list(pairwise(ordered))


def only_heading(region: str, heading_path: Sequence[str]) -> bool:
    """Return whether ``region`` (a section's text) is just the section's own heading."""
    return bool(region.strip()) and _heading_end(region, 0, len(region), heading_path) == len(
        region.rstrip()
    )


def _heading_end(text: str, start: int, end: int, heading_path: Sequence[str]) -> int:
    """Return where the heading line opening ``text[start:end]`` ends, 0 if there is none.

    The section's text must begin with its own heading (the last of its path).
    """
    if not heading_path or not heading_path[-1]:
        return 0
    heading = heading_path[-1]
    line_end = _LINE_BREAK.search(text, start, end)
    line_start, line_end = trim(text, start, line_end.start() if line_end else end)
    words = " ".join(text[line_start:line_end].split())
    # Parsers clip long headings (parsers.layout.TITLE_MAX_CHARS).
    if words == heading or (len(heading) >= 200 and words.startswith(heading)):
        return line_end
    return 0


def _word_start(text: str, start: int, end: int) -> int:
    # Begin the overlap on a word when one starts within it.
    if start > 0 and not text[start - 1].isspace():
        for offset in range(start, end):
            if text[offset].isspace():
                return skip_space(text, offset, end)
    return skip_space(text, start, end)
