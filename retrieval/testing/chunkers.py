"""The chunker suite: spans with exact offsets, covering every non-blank character.

The contract (:class:`~retrieval.services.chunkers.base.BaseChunker`): spans are ordered,
start and end on non-whitespace, leave no text outside some span, overlap only for a
chunker that says so (``overlap`` / ``overlap_tokens``), and hold at most ``max_tokens``
tokens where the chunker has that limit; whitespace-only text gives no span. Checked on
chosen texts and, with hypothesis, on any text.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.services.chunkers.base import BaseChunker
from retrieval.services.chunkers.tokens import count_tokens
from retrieval.services.types import ChunkSpan, Section
from retrieval.testing.base import Suite

__all__ = [
    "ChunkerSuite",
    "assert_contract",
    "assert_within_tokens",
    "texts",
    "texts_with_sections",
]

# Each suite subclass runs the same property test on its own implementation (hypothesis
# calls that "differing executors"); examples saved by one only add cases to another.
PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)

# Pieces that exercise the edge cases: line endings, blank lines, sentence ends,
# non-ASCII whitespace, combining marks, emoji (multi-token characters), CJK.
FRAGMENTS = (
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    "\r\n\r\n",
    "\n \n",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\u3000",
    ". ",
    "! ",
    "? ",
    "\u3002",
    "e\u0301",
    "\u0301",
    "\U0001f600",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u4e2d\u6587",
    "\ud55c\uad6d\uc5b4",
    "word",
    "sentence",
    "<|endoftext|>",
    "x" * 40,
    "hello world. ",
)

texts = st.lists(
    st.one_of(st.text(), st.sampled_from(FRAGMENTS)),
    max_size=40,
).map("".join)


@st.composite
def texts_with_sections(draw: st.DrawFn) -> tuple[str, tuple[Section, ...]]:
    """Return a text and ordered, non-overlapping sections, with gaps between some."""
    text = draw(texts)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=8)))
    sections = []
    for start, end in pairwise(cuts):
        if draw(st.booleans()):
            sections.append(Section(start, end, page=len(sections) + 1))
    return text, tuple(sections)


def assert_contract(text: str, spans: Sequence[ChunkSpan], *, may_overlap: bool) -> None:
    """Assert every point of the ``BaseChunker`` contract for ``spans`` over ``text``."""
    assert all(isinstance(span, ChunkSpan) for span in spans)
    if not text.strip():
        assert spans == []
    for span in spans:
        assert 0 <= span.start < span.end <= len(text), span
        assert not text[span.start].isspace(), f"{span} starts on whitespace"
        assert not text[span.end - 1].isspace(), f"{span} ends on whitespace"
    for previous, span in pairwise(spans):
        assert previous.start < span.start, f"{span} does not start after {previous}"
        assert previous.end < span.end, f"{span} does not end after {previous}"
        if not may_overlap:
            assert previous.end <= span.start, f"{span} overlaps {previous}"
    covered_until = 0
    for span in spans:
        uncovered = text[covered_until : span.start]
        assert not uncovered.strip(), f"{uncovered!r} before {span} is in no span"
        covered_until = max(covered_until, span.end)
    assert not text[covered_until:].strip(), "the end of the text is in no span"


def assert_within_tokens(text: str, spans: Sequence[ChunkSpan], max_tokens: int) -> None:
    """Assert each span, encoded on its own, has at most ``max_tokens`` tokens."""
    for span in spans:
        count = count_tokens(text[span.start : span.end])
        assert count <= max_tokens, f"{span} has {count} tokens"


PROSE = (
    "# Title\n\nThe first paragraph has two sentences. This is the second one!\n\n"
    "A second paragraph\nspans two lines? Yes.\r\n\r\n"
    "Unicode too: caf\u00e9, na\u0131\u0308ve, \u4e2d\u6587\u6587\u672c\u3002 \U0001f600\U0001f600 "
    "and averyveryverylongwordwithoutanybreakswhatsoeverthatgoesonandon.\n"
)


class ChunkerSuite(Suite):
    """The ``BaseChunker`` contract. Define :meth:`make_chunker` (small sizes find more)."""

    def make_chunker(self) -> BaseChunker:
        raise NotImplementedError("Return the chunker under test.")

    def check(self, chunker: BaseChunker, text: str) -> None:
        spans = chunker.chunk(text)
        overlap = bool(getattr(chunker, "overlap", 0) or getattr(chunker, "overlap_tokens", 0))
        assert_contract(text, spans, may_overlap=overlap)
        budget = getattr(chunker, "max_tokens", None)
        if budget is not None:
            assert_within_tokens(text, spans, budget)

    def test_is_a_base_chunker(self) -> None:
        assert isinstance(self.make_chunker(), BaseChunker)

    @pytest.mark.parametrize("text", ["", " ", "\n\n\t \r\n", "\u3000\u00a0\u2028"])
    def test_whitespace_only_text_gives_no_spans(self, text: str) -> None:
        assert self.make_chunker().chunk(text) == []

    def test_short_text_is_one_span_without_edge_whitespace(self) -> None:
        spans = self.make_chunker().chunk("  \nhi!\n ")
        assert [(span.start, span.end) for span in spans] == [(3, 6)]

    def test_prose_keeps_the_contract(self) -> None:
        self.check(self.make_chunker(), PROSE)

    def test_sections_are_accepted(self) -> None:
        sections = (Section(0, 7), Section(9, 40, page=2, heading_path=("Title",)))
        chunker = self.make_chunker()
        overlap = bool(getattr(chunker, "overlap", 0) or getattr(chunker, "overlap_tokens", 0))
        assert_contract(PROSE, chunker.chunk(PROSE, sections=sections), may_overlap=overlap)

    def test_lone_surrogates_do_not_break_chunking(self) -> None:
        self.check(self.make_chunker(), "broken \ud800 pair \udc00\ud83d text " * 5)

    @PROPERTY_SETTINGS
    @given(text=texts)
    def test_the_contract_holds_for_any_text(self, text: str) -> None:
        self.check(self.make_chunker(), text)
