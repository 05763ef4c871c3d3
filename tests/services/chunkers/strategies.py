"""Hypothesis strategies and the contract check shared by the chunker tests."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from retrieval.services.chunkers.tokens import count_tokens
from retrieval.services.types import ChunkSpan, Section

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
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
