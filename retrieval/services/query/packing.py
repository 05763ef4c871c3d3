"""Pack retrieved chunks into a token budget: a context string for an LLM prompt, with citations.

The best results go in first. Chunks of one document that are neighbours (consecutive
``Chunk.index``, or offsets that touch or overlap) become one passage under one
citation number. A chunk that does not fit whole is cut at a sentence boundary, or
left out; a cut never falls mid-sentence. Packing reads only the loaded results, never
the database.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from retrieval.conf import retrieval_settings
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.types import RetrievalResult

__all__ = ["Citation", "PackedContext", "pack_context", "sentence_boundaries"]

SEPARATOR = "\n\n"
# Where a sentence ends: after . ! ? (optionally closed by quotes or brackets) before
# whitespace, after 。！？, or at a line break.
# A text that ends a sentence (or a heading line's colon), perhaps closed by quotes.
_ENDS_SENTENCE = re.compile(r"[.!?:;\u3002\uff01\uff1f][\"')\]]*\s*$")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|[\u3002\uff01\uff1f]|(?=\n)")


@dataclass(frozen=True)
class Citation:
    """What ``[number]`` in the context refers to: a span ``start:end`` of a document."""

    number: int
    document_id: int
    external_id: str
    title: str
    page: int | None
    heading_path: tuple[str, ...]
    start: int
    end: int
    chunk_ids: tuple[int, ...]

    def to_dict(self) -> dict:
        return {
            "number": self.number,
            "document_id": self.document_id,
            "document": self.external_id,
            "title": self.title,
            "page": self.page,
            "heading_path": list(self.heading_path),
            "start": self.start,
            "end": self.end,
            "chunk_ids": list(self.chunk_ids),
        }


@dataclass(frozen=True)
class PackedContext:
    """The context string, its citations in order of number, and its size in tokens."""

    text: str
    citations: tuple[Citation, ...]
    token_count: int
    results_used: int

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "citations": [citation.to_dict() for citation in self.citations],
            "token_count": self.token_count,
            "results_used": self.results_used,
        }


@dataclass
class _Piece:
    """Text of one chunk taken into a passage: ``text == document[start:end]``."""

    result: RetrievalResult
    start: int
    end: int
    text: str

    @property
    def whole(self) -> bool:
        return self.start == self.result.chunk.start and self.end == self.result.chunk.end


@dataclass
class _Passage:
    """Neighbouring pieces of one document, in document order."""

    pieces: list[_Piece] = field(default_factory=list)

    @property
    def document_id(self) -> int:
        return self.pieces[0].result.chunk.document_id

    def accepts(self, result: RetrievalResult) -> str | None:
        """Return ``"after"`` or ``"before"`` if ``result``'s chunk neighbours this passage."""
        if result.chunk.document_id != self.document_id:
            return None
        whole = _Piece(result, result.chunk.start, result.chunk.end, result.chunk.content)
        if _touching(self.pieces[-1], whole):
            return "after"
        if _touching(whole, self.pieces[0]):
            return "before"
        return None

    def body(self) -> str:
        parts = [self.pieces[0].text]
        for previous, piece in zip(self.pieces, self.pieces[1:], strict=False):
            if piece.start < previous.end:  # overlapping chunks: keep the new part only
                parts.append(piece.text[previous.end - piece.start :])
            else:
                # The gap between neighbouring chunks is the whitespace chunkers trim: a
                # line break after a sentence, a space inside one (a chunk cut mid-sentence
                # read as two lines made its first half a heading to the extractive answer).
                if piece.start > previous.end:
                    parts.append("\n" if _ENDS_SENTENCE.search(previous.text) else " ")
                parts.append(piece.text)
        return "".join(parts)

    def render(self, number: int) -> str:
        chunk = self.pieces[0].result.chunk
        document = chunk.document
        body = self.body()
        # A title that is the passage's own first line (plain text's) would say it twice.
        title = document.title.strip()
        label = title if title and body.split("\n", 1)[0].strip() != title else ""
        label = label or document.external_id
        if chunk.page is not None:
            label += f", page {chunk.page}"
        if chunk.heading_path:
            label += " — " + " > ".join(chunk.heading_path)
        return f"[{number}] {label}\n{body}"

    def citation(self, number: int) -> Citation:
        chunk = self.pieces[0].result.chunk
        return Citation(
            number=number,
            document_id=chunk.document_id,
            external_id=chunk.document.external_id,
            title=chunk.document.title,
            page=chunk.page,
            heading_path=tuple(chunk.heading_path),
            start=self.pieces[0].start,
            end=max(piece.end for piece in self.pieces),
            chunk_ids=tuple(piece.result.chunk.pk for piece in self.pieces),
        )


def _touching(first: _Piece, second: _Piece) -> bool:
    """Whether ``second`` continues ``first`` without a gap of left-out text."""
    a, b = first.result.chunk, second.result.chunk
    if first.start <= second.start <= first.end:
        return True
    return (
        b.index == a.index + 1 and first.end == a.end and second.start == b.start
    )  # the gap between consecutive chunks is whitespace the chunker trimmed


def sentence_boundaries(text: str) -> list[int]:
    """Return the offsets in ``text`` where a sentence ends (exclusive), in order."""
    ends = {match.end() for match in _SENTENCE_END.finditer(text)}
    ends.discard(0)
    return sorted(ends)


def sentence_starts(text: str) -> list[int]:
    """Return the offsets where a sentence starts after a boundary (whitespace skipped)."""
    starts = []
    for end in sentence_boundaries(text):
        start = end
        while start < len(text) and text[start].isspace():
            start += 1
        if 0 < start < len(text):
            starts.append(start)
    return starts


class _Packer:
    def __init__(self, max_tokens: int, encoding: str) -> None:
        self.max_tokens = max_tokens
        self.encoding = encoding
        self.passages: list[_Passage] = []
        self.costs: list[int] = []  # tokens of each rendered passage

    def _count(self, text: str) -> int:
        return count_tokens(text, self.encoding)

    def _total(self, costs: Sequence[int]) -> int:
        return sum(costs) + self._count(SEPARATOR) * max(len(costs) - 1, 0)

    def _fits(self, index: int | None, passage: _Passage) -> int | None:
        """Return the passage's cost if placing it (at ``index``, or appended) fits."""
        number = (index if index is not None else len(self.passages)) + 1
        cost = self._count(passage.render(number))
        costs = list(self.costs)
        if index is None:
            costs.append(cost)
        else:
            costs[index] = cost
        return cost if self._total(costs) <= self.max_tokens else None

    def add(self, result: RetrievalResult) -> bool:
        """Add ``result`` whole or cut at a sentence boundary; return whether any fitted."""
        chunk = result.chunk
        index: int | None = None
        side, passage = "after", _Passage()
        for position, existing in enumerate(self.passages):
            neighbour = existing.accepts(result)
            if neighbour is not None:
                index, side, passage = position, neighbour, existing
                break
        for start, end in self._spans(chunk, side):
            text = chunk.content[start - chunk.start : end - chunk.start]
            piece = _Piece(result, start, end, text)
            candidate = _Passage(
                [*passage.pieces, piece] if side == "after" else [piece, *passage.pieces]
            )
            cost = self._fits(index, candidate)
            if cost is not None:
                if index is None:
                    self.passages.append(candidate)
                    self.costs.append(cost)
                else:
                    self.passages[index] = candidate
                    self.costs[index] = cost
                return True
        return False

    @staticmethod
    def _spans(chunk, side: str) -> list[tuple[int, int]]:
        """Return the chunk's whole span, then shorter ones cut at sentence boundaries."""
        text = chunk.content
        spans = [(chunk.start, chunk.end)]
        if side == "after":  # keep the beginning, longest first
            for end in reversed(sentence_boundaries(text)):
                if end < len(text.rstrip()):
                    spans.append((chunk.start, chunk.start + end))
        else:  # keep the end, so the piece still touches the passage after it
            for start in sentence_starts(text):
                spans.append((chunk.start + start, chunk.end))
        return spans

    def merge_bridged(self) -> None:
        """Join passages of one document that a later chunk made neighbours."""
        merged: list[_Passage] = []
        for passage in self.passages:
            for other in merged:
                if other.document_id == passage.document_id and (
                    _touching(other.pieces[-1], passage.pieces[0])
                    or _touching(passage.pieces[-1], other.pieces[0])
                ):
                    other.pieces[:] = sorted([*other.pieces, *passage.pieces], key=_order)
                    break
            else:
                merged.append(passage)
        self.passages = merged


def _order(piece: _Piece) -> tuple[int, int]:
    return piece.start, piece.end


def pack_context(
    results: Sequence[RetrievalResult], *, max_tokens: int, encoding: str | None = None
) -> PackedContext:
    """Pack the best of ``results`` into at most ``max_tokens`` tokens.

    :param results: retrieval results; the highest scores are packed first. Nothing else
        is read from the database, so the context holds only what the search that produced
        ``results`` could see (its user's or scope's visibility).
    :param max_tokens: the budget for the whole context string, citation markers included.
    :param encoding: tiktoken encoding that counts tokens (default ``TOKEN_ENCODING``).

    Each passage starts with ``[n] title, page p — heading > path`` on its own line
    (the external id stands in for a missing title, or one that is the first line);
    passages are separated by a blank line and ordered by their best result.
    """
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, not {max_tokens!r}.")
    packer = _Packer(max_tokens, encoding or retrieval_settings.TOKEN_ENCODING)
    used, seen = 0, set()
    for result in sorted(results, key=lambda r: (-r.score, r.rank)):
        if result.chunk.pk not in seen:  # e.g. results of several queries put together
            seen.add(result.chunk.pk)
            used += packer.add(result)
    packer.merge_bridged()
    passages = packer.passages
    while True:
        text = SEPARATOR.join(p.render(n) for n, p in enumerate(passages, start=1))
        tokens = packer._count(text)
        # Token counts of joined texts can differ slightly from the sum of their parts.
        if tokens <= max_tokens or not passages:
            break
        used -= len(passages[-1].pieces)
        passages = passages[:-1]
    citations = tuple(p.citation(n) for n, p in enumerate(passages, start=1))
    return PackedContext(text=text, citations=citations, token_count=tokens, results_used=used)
