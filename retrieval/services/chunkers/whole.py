"""One chunk per document: for short records (FAQ entries, abstracts, products)."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.services.chunkers.base import BaseChunker
from retrieval.services.types import ChunkSpan, Section


class WholeChunker(BaseChunker):
    """Return the whole text, trimmed, as a single chunk (embedders may truncate it)."""

    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        start = len(text) - len(text.lstrip())
        end = len(text.rstrip())
        return [ChunkSpan(start, end)] if end > start else []
