"""The chunker interface: text (+ parser sections) -> spans with exact offsets."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from retrieval.services.types import ChunkSpan, Section


class BaseChunker(ABC):
    """Split text into chunks given as ``(start, end)`` offsets.

    Contract every implementation keeps (the conformance tests check it):
    spans are in order, within ``0..len(text)``, neither start nor end on
    whitespace, and together cover every non-whitespace character; whitespace-only
    text gives no spans. Spans overlap only where the chunker has an ``overlap`` option.
    """

    alias: str = ""

    @abstractmethod
    def chunk(self, text: str, *, sections: Sequence[Section] = ()) -> list[ChunkSpan]:
        """Return the chunk spans of ``text``; ``sections`` are the parser's structure."""
