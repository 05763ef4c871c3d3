"""TokenChunker: token windows, their overlap and the token budget."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval.services.chunkers import tokens
from retrieval.services.chunkers.token import TokenChunker
from retrieval.services.chunkers.tokens import count_tokens
from retrieval.testing.chunkers import (
    PROPERTY_SETTINGS,
    assert_contract,
    assert_within_tokens,
    texts,
)

# Every word of this text is one token, so windows can be worked out by hand.
CAT_TEXT = " ".join(["the cat sat on the mat"] * 6)


def texts_of(text: str, chunker: TokenChunker) -> list[str]:
    return [text[span.start : span.end] for span in chunker.chunk(text)]


def test_windows_step_max_tokens_minus_overlap() -> None:
    assert texts_of(CAT_TEXT, TokenChunker(max_tokens=8, overlap=3)) == [
        "the cat sat on the mat the cat",
        "mat the cat sat on the mat the",
        "the mat the cat sat on the mat",
        "on the mat the cat sat on the",
        "sat on the mat the cat sat on",
        "cat sat on the mat the cat sat",
        "the cat sat on the mat",
    ]


def test_windows_without_overlap_do_not_share_text() -> None:
    chunks = texts_of(CAT_TEXT, TokenChunker(max_tokens=8, overlap=0))

    assert " ".join(chunks) == CAT_TEXT
    assert [count_tokens(chunk) for chunk in chunks] == [8, 8, 8, 8, 4]


def test_multi_token_characters_are_never_cut() -> None:
    # Each emoji encodes to two tokens: five-token windows hold two emoji, not two and a half.
    assert texts_of("\U0001f600" * 5, TokenChunker(max_tokens=5, overlap=0)) == [
        "\U0001f600\U0001f600",
        "\U0001f600\U0001f600",
        "\U0001f600",
    ]


def test_other_encodings_are_used_for_the_budget() -> None:
    text = "Tokenizers differ: \u4e2d\u6587\u6587\u672c and \U0001f600 " * 20
    chunker = TokenChunker(max_tokens=10, overlap=2, encoding="o200k_base")
    spans = chunker.chunk(text)

    assert_contract(text, spans, may_overlap=True)
    assert max(count_tokens(text[s.start : s.end], "o200k_base") for s in spans) == 10


def test_long_text_is_chunked_across_encoding_blocks() -> None:
    text = "wordwithoutspaces" * 10_000 + " tail"
    spans = TokenChunker(max_tokens=50, overlap=0).chunk(text)

    assert_contract(text, spans, may_overlap=False)
    assert_within_tokens(text, spans, 50)


@PROPERTY_SETTINGS
@given(text=texts, max_tokens=st.integers(4, 12), data=st.data())
def test_windows_fit_the_budget_and_share_at_most_overlap_tokens(
    text: str, max_tokens: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, max_tokens - 1))
    spans = TokenChunker(max_tokens=max_tokens, overlap=overlap).chunk(text)

    assert_contract(text, spans, may_overlap=overlap > 0)
    assert_within_tokens(text, spans, max_tokens)
    for previous, span in pairwise(spans):
        if span.start < previous.end:
            assert count_tokens(text[span.start : previous.end]) <= overlap


def test_constructor_does_not_load_the_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(name: str) -> None:
        raise AssertionError(f"loaded {name}")

    monkeypatch.setattr(tokens, "get_encoding", fail)
    chunker = TokenChunker(max_tokens=8, overlap=2, encoding="o200k_base")

    with pytest.raises(AssertionError, match="loaded o200k_base"):
        chunker.chunk("now it loads")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 3}, "max_tokens must be an integer of at least 4, got 3"),
        ({"max_tokens": "8"}, "max_tokens must be an integer of at least 4, got '8'"),
        ({"max_tokens": 8, "overlap": 8}, r"overlap must be .* max_tokens - 1 \(7\), got 8"),
        ({"overlap": -1}, "overlap must be .* got -1"),
        ({"encoding": "cl100k"}, "encoding must be one of .*cl100k_base.*, got 'cl100k'"),
    ],
)
def test_bad_options_raise_value_error(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TokenChunker(**options)  # type: ignore[arg-type]
