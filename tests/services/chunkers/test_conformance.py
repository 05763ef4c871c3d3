"""The ``BaseChunker`` contract, checked against every chunker with small sizes."""

from __future__ import annotations

import pytest
from hypothesis import given

from retrieval.services.chunkers.base import BaseChunker
from retrieval.services.chunkers.character import CharacterChunker
from retrieval.services.chunkers.paragraph import ParagraphChunker
from retrieval.services.chunkers.recursive import RecursiveChunker
from retrieval.services.chunkers.token import TokenChunker
from retrieval.services.chunkers.whole import WholeChunker
from retrieval.services.types import ChunkSpan, Section

from .strategies import PROPERTY_SETTINGS, assert_contract, assert_within_tokens, texts

CHUNKERS = {
    "character": lambda: CharacterChunker(size=12, overlap=0),
    "character-overlap": lambda: CharacterChunker(size=12, overlap=5),
    "paragraph": lambda: ParagraphChunker(max_chars=20),
    "token": lambda: TokenChunker(max_tokens=6, overlap=0),
    "token-overlap": lambda: TokenChunker(max_tokens=6, overlap=2),
    "recursive": lambda: RecursiveChunker(max_tokens=8, min_tokens=3),
    "recursive-overlap": lambda: RecursiveChunker(max_tokens=8, overlap_tokens=3, min_tokens=0),
    "whole": WholeChunker,
}

PROSE = (
    "# Title\n\nThe first paragraph has two sentences. This is the second one!\n\n"
    "A second paragraph\nspans two lines? Yes.\r\n\r\n"
    "Unicode too: caf\u00e9, na\u0131\u0308ve, \u4e2d\u6587\u6587\u672c\u3002 \U0001f600\U0001f600 "
    "and averyveryverylongwordwithoutanybreakswhatsoeverthatgoesonandon.\n"
)


def may_overlap(chunker: BaseChunker) -> bool:
    return bool(getattr(chunker, "overlap", 0) or getattr(chunker, "overlap_tokens", 0))


def token_budget(chunker: BaseChunker) -> int | None:
    return getattr(chunker, "max_tokens", None)


@pytest.fixture(params=sorted(CHUNKERS))
def chunker(request: pytest.FixtureRequest) -> BaseChunker:
    return CHUNKERS[request.param]()


def check(chunker: BaseChunker, text: str) -> None:
    spans = chunker.chunk(text)
    assert_contract(text, spans, may_overlap=may_overlap(chunker))
    budget = token_budget(chunker)
    if budget is not None:
        assert_within_tokens(text, spans, budget)


def test_is_a_base_chunker(chunker: BaseChunker) -> None:
    assert isinstance(chunker, BaseChunker)


@pytest.mark.parametrize("text", ["", " ", "\n\n\t \r\n", "\u3000\u00a0\u2028"])
def test_whitespace_only_text_gives_no_spans(chunker: BaseChunker, text: str) -> None:
    assert chunker.chunk(text) == []


def test_short_text_is_one_span_without_edge_whitespace(chunker: BaseChunker) -> None:
    assert [(span.start, span.end) for span in chunker.chunk("  \nhi!\n ")] == [(3, 6)]


def test_prose_is_split_and_keeps_the_contract(chunker: BaseChunker) -> None:
    spans = chunker.chunk(PROSE)
    if isinstance(chunker, WholeChunker):
        assert spans == [ChunkSpan(0, len(PROSE) - 1)]  # all but the final newline
    else:
        assert len(spans) > 3
    check(chunker, PROSE)


def test_sections_argument_is_accepted(chunker: BaseChunker) -> None:
    sections = (Section(0, 7), Section(9, 40, page=2, heading_path=("Title",)))
    spans = chunker.chunk(PROSE, sections=sections)
    assert_contract(PROSE, spans, may_overlap=may_overlap(chunker))


def test_lone_surrogates_do_not_break_chunking(chunker: BaseChunker) -> None:
    text = "broken \ud800 pair \udc00\ud83d text " * 5
    check(chunker, text)


@pytest.mark.parametrize("name", sorted(CHUNKERS))
@PROPERTY_SETTINGS
@given(text=texts)
def test_contract_holds_for_any_text(name: str, text: str) -> None:
    check(CHUNKERS[name](), text)
