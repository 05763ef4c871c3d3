"""CharacterChunker: window sizes, whitespace-preferring ends and overlap."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.services.chunkers.character import CharacterChunker
from retrieval.testing.chunkers import PROPERTY_SETTINGS, assert_contract, texts


def texts_of(text: str, chunker: CharacterChunker) -> list[str]:
    return [text[span.start : span.end] for span in chunker.chunk(text)]


def test_text_without_whitespace_steps_size_minus_overlap() -> None:
    text = "abcdefghijklmnopqrstuvwxyz"
    spans = CharacterChunker(size=10, overlap=3).chunk(text)

    assert [(span.start, span.end) for span in spans] == [(0, 10), (7, 17), (14, 24), (21, 26)]


def test_windows_without_overlap_tile_the_text() -> None:
    assert texts_of("abcdefghijklmnopqrstuvwxyz", CharacterChunker(size=10, overlap=0)) == [
        "abcdefghij",
        "klmnopqrst",
        "uvwxyz",
    ]


def test_window_ends_at_whitespace_in_its_last_fifth() -> None:
    text = "aaaaaaaa bbbbbbbb cccccccc"
    # The 10-character window "aaaaaaaa b" ends at the space rather than cutting "b".
    assert texts_of(text, CharacterChunker(size=10, overlap=0)) == [
        "aaaaaaaa",
        "bbbbbbbb",
        "cccccccc",
    ]


def test_window_does_not_end_at_whitespace_outside_its_last_fifth() -> None:
    text = "aa bbbbbbbbbbbbbbbbbbbb"
    assert texts_of(text, CharacterChunker(size=10, overlap=0))[0] == "aa bbbbbbb"


def test_overlap_starts_at_a_word_inside_the_overlap() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    chunks = texts_of(text, CharacterChunker(size=20, overlap=8))

    assert chunks[:2] == ["alpha beta gamma", "gamma delta epsilon"]
    for chunk in chunks:
        assert len(chunk) <= 20


@PROPERTY_SETTINGS
@given(text=texts, size=st.integers(1, 30), data=st.data())
def test_spans_are_at_most_size_and_overlap_at_most_overlap(
    text: str, size: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    spans = CharacterChunker(size=size, overlap=overlap).chunk(text)

    assert_contract(text, spans, may_overlap=overlap > 0)
    for span in spans:
        assert span.end - span.start <= size
    for previous, span in pairwise(spans):
        assert previous.end - span.start <= overlap


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": 0}, "size must be a positive integer, got 0"),
        ({"size": -5}, "size must be a positive integer, got -5"),
        ({"size": 2.5}, "size must be a positive integer, got 2.5"),
        ({"size": 10, "overlap": 10}, r"overlap must be .* size - 1 \(9\), got 10"),
        ({"size": 10, "overlap": -1}, "overlap must be .* got -1"),
    ],
)
def test_bad_options_raise_value_error(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CharacterChunker(**options)  # type: ignore[arg-type]
