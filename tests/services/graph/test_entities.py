"""Entity keys by hand."""

from __future__ import annotations

import pytest

from retrieval.services.graph.entities import entity_key, singular


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Recursive Chunker", "recursive chunker"),
        ("  the   recursive\tchunkers. ", "recursive chunker"),
        ("PostgreSQL's", "postgresql s"),
        ("all-MiniLM-L6-v2", "all minilm l6 v2"),
        ("Libraries", "library"),
        ("indexes", "index"),
        ("class", "class"),
        ("corpus", "corpus"),
        ("A", ""),
        ("!!", ""),
        ("ＰｏｓｔｇｒｅＳＱＬ", "postgresql"),
    ],
)
def test_entity_key_normalises_case_whitespace_punctuation_and_plurals(text, key):
    assert entity_key(text) == key


def test_singular_leaves_short_and_non_plural_words():
    assert [singular(w) for w in ["bus", "gas", "its", "analysis", "chunks", "boxes"]] == [
        "bus",
        "gas",
        "its",
        "analysis",
        "chunk",
        "box",
    ]
