"""Cutting a document's text into segments by the chunks that cover them."""

from __future__ import annotations

from retrieval.admin.highlight import segments
from retrieval.models import Chunk


def chunk(index: int, start: int, end: int, page: int | None = None) -> Chunk:
    return Chunk(index=index, start=start, end=end, page=page)


def test_gaps_overlaps_anchors_and_pages():
    text = "aaaa  bbbbbb"
    # chunk 0: "aaaa", chunk 1: "bbbb" (8..12 overlaps chunk 2), chunk 2: "bbbb" at 8..12
    found = segments(text, [chunk(0, 0, 4, 1), chunk(1, 6, 10, 1), chunk(2, 8, 12, 2)])
    assert "".join(s.text for s in found) == text
    assert [(s.text, s.chunks, s.starts, s.page) for s in found] == [
        ("aaaa", (0,), (0,), 1),
        ("  ", (), (), None),
        ("bb", (1,), (1,), None),
        ("bb", (1, 2), (2,), 2),
        ("bb", (2,), (), None),
    ]
    assert found[3].css_class == "retrieval-chunk retrieval-chunk-overlap"
    assert found[4].css_class == "retrieval-chunk retrieval-chunk-0"


def test_offsets_past_the_end_are_clipped_and_empty_text_has_no_segments():
    assert [s.text for s in segments("abc", [chunk(0, 1, 99)])] == ["a", "bc"]
    assert segments("", []) == []
