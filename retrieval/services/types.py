"""Frozen records passed between the ingestion and retrieval stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrieval.models import Chunk


@dataclass(frozen=True)
class Section:
    """A span of parsed text with the structure a parser knows about it.

    ``page`` is 1-based for paged sources (PDF), else ``None``; ``heading_path``
    lists the headings enclosing the span, outermost first. ``continues``: the span
    goes on from the section before it with no break in the content (a page turned
    inside one part of a PDF), so a chunk may run across the two.
    """

    start: int
    end: int
    page: int | None = None
    heading_path: tuple[str, ...] = ()
    continues: bool = False


@dataclass(frozen=True)
class ParsedDocument:
    """What a parser returns: the text that is chunked, with its structure.

    ``sections`` cover parts of ``text`` (not necessarily all of it) in order,
    without overlap; a chunk takes the page and headings of the section it starts in.
    """

    text: str
    title: str = ""
    sections: tuple[Section, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk as offsets into the parsed text: ``chunk_text == text[start:end]``."""

    start: int
    end: int


@dataclass(frozen=True)
class ScoredChunk:
    """A chunk id with its score: what retrievers rank and fusion combines.

    ``metadata`` explains the score (e.g. each fused leg's score and rank).
    """

    chunk_id: int
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RetrievalResult:
    """One retrieved chunk with its score and 0-based rank.

    ``metadata`` holds what explains the ranking (e.g. each fused leg's score and rank).
    """

    chunk: Chunk
    score: float
    rank: int
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def chunk_id(self) -> int:
        return self.chunk.pk

    @property
    def token_count(self) -> int:
        """Return the chunk's length in tokens (``TOKEN_ENCODING``, counted at indexing)."""
        return self.chunk.token_count

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready form used by the commands and the API."""
        chunk = self.chunk
        document = chunk.document
        return {
            "rank": self.rank + 1,
            "score": self.score,
            "document": document.external_id,
            "title": document.title,
            "chunk_id": chunk.pk,
            "chunk_index": chunk.index,
            "start": chunk.start,
            "end": chunk.end,
            "page": chunk.page,
            "heading_path": list(chunk.heading_path),
            "token_count": chunk.token_count,
            "text": chunk.content,
            "metadata": {**chunk.metadata, **self.metadata},
        }


class SearchResults(list):
    """A search's results, best first, with the query's trace (rewrites, agentic rounds,
    LLM calls with their tokens and milliseconds) and, if asked for, the packed context;
    ``trace_id`` is the primary key of the ``QueryTrace`` kept of it (``None``: not kept)."""

    def __init__(
        self,
        results: list[RetrievalResult],
        *,
        trace: dict[str, Any],
        context: Any = None,
        trace_id: int | None = None,
    ) -> None:
        super().__init__(results)
        self.trace = trace
        self.context = context
        self.trace_id = trace_id
