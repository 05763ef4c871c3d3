"""ParagraphChunker: paragraphs merged up to ``max_chars``, long ones cut."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.services.chunkers.paragraph import ParagraphChunker
from retrieval.testing.chunkers import PROPERTY_SETTINGS, assert_contract, texts


def texts_of(text: str, chunker: ParagraphChunker) -> list[str]:
    return [text[span.start : span.end] for span in chunker.chunk(text)]


def test_paragraphs_merge_while_they_fit() -> None:
    text = "One two.\n\nThree four.\r\n\r\nFive six seven.\n \t\nEight."
    assert texts_of(text, ParagraphChunker(max_chars=25)) == [
        "One two.\n\nThree four.",
        "Five six seven.\n \t\nEight.",
    ]


def test_single_line_breaks_do_not_separate_paragraphs() -> None:
    text = "line one\nline two\n\nnext"
    assert texts_of(text, ParagraphChunker(max_chars=17)) == ["line one\nline two", "next"]


def test_long_paragraph_is_cut_by_characters_without_overlap() -> None:
    text = "short\n\n" + "word " * 10 + "\n\nend"
    assert texts_of(text, ParagraphChunker(max_chars=10)) == [
        "short",
        "word word",
        "word word",
        "word word",
        "word word",
        "word word",
        "end",
    ]


@PROPERTY_SETTINGS
@given(text=texts, max_chars=st.integers(1, 40))
def test_spans_stay_within_max_chars(text: str, max_chars: int) -> None:
    spans = ParagraphChunker(max_chars=max_chars).chunk(text)

    assert_contract(text, spans, may_overlap=False)
    for span in spans:
        assert span.end - span.start <= max_chars


@pytest.mark.parametrize("max_chars", [0, -1, 1.5, True])
def test_bad_max_chars_raise_value_error(max_chars: object) -> None:
    with pytest.raises(
        ValueError, match=f"max_chars must be a positive integer, got {max_chars!r}"
    ):
        ParagraphChunker(max_chars=max_chars)  # type: ignore[arg-type]


def test_overlap_repeats_the_last_paragraphs_that_fit():
    """The design's paragraph chunker overlaps; it did not take the option at all."""
    text = "one one\n\ntwo two\n\nthree three\n\nfour four"

    def pieces(chunker: ParagraphChunker) -> list[str]:
        return [text[s.start : s.end] for s in chunker.chunk(text)]

    assert pieces(ParagraphChunker(max_chars=20)) == [
        "one one\n\ntwo two",
        "three three",
        "four four",
    ]
    # Each chunk begins with the paragraph before it when both fit within max_chars.
    assert pieces(ParagraphChunker(max_chars=20, overlap=1)) == [
        "one one\n\ntwo two",
        "two two\n\nthree three",
        "four four",  # "three three" and it would take 22 characters
    ]
    assert pieces(ParagraphChunker(max_chars=30, overlap=1)) == [
        "one one\n\ntwo two\n\nthree three",
        "three three\n\nfour four",
    ]
    with pytest.raises(ValueError, match="overlap"):
        ParagraphChunker(overlap=-1)
