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

    def split_span(self, text: str, start: int, end: int, *, fraction: float) -> list[ChunkSpan]:
        """Split one of this chunker's chunks, ``text[start:end]``, into smaller ones.

        Each part should hold at most about ``fraction`` of the chunk's text. Ingestion
        calls it for a chunk the embedder could not read whole (its header and text are
        longer than the model's window). The default keeps the chunk as it is.
        """
        return [ChunkSpan(start, end)]


def require_int(
    name: str, value: object, *, low: int, high: int | None = None, high_name: str = ""
) -> int:
    """Return ``value`` if it is an integer in ``[low, high]``; else raise ``ValueError``."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and low <= value
        and (high is None or value <= high)
    ):
        return value
    if high is not None:
        expected = f"an integer from {low} to {high_name} ({high})"
    else:
        expected = {0: "a non-negative integer", 1: "a positive integer"}.get(
            low, f"an integer of at least {low}"
        )
    raise ValueError(f"{name} must be {expected}, got {value!r}.")
