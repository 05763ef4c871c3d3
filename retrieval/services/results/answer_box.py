"""The answer above the results: an :class:`~retrieval.services.answers.records.Answer` made ready
for the page, its ``[n]`` markers linked to the sources listed under it.

Every link goes where a result's title would (:func:`document_url`: the host object's
page, else the app's document page at the cited chunk), and only to documents the
answer service already checked against the reader's scope.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from retrieval.models import Chunk, Document
from retrieval.services.answers.records import Answer
from retrieval.services.results.page import document_url, host_url

__all__ = ["AnswerBox", "Source", "answer_box"]

_MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class Source:
    """A cited passage: its number, document title, link and the sentence quoted."""

    number: int
    title: str
    url: str
    quote: str

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.title, "url": self.url, "quote": self.quote}


@dataclass(frozen=True)
class AnswerBox:
    """The answer as the page shows it: text in pieces, each either plain or a citation."""

    segments: tuple[tuple[str, int | None], ...]
    sources: tuple[Source, ...]
    abstained: bool
    mode: str
    reason: str
    closest: tuple[Source, ...]
    #: The answer's stored trace, which its asker votes on (``None`` when not kept).
    trace_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": "".join(text for text, _ in self.segments),
            "sources": [source.to_dict() for source in self.sources],
            "abstained": self.abstained,
            "mode": self.mode,
            "reason": self.reason,
            "closest": [source.to_dict() for source in self.closest],
            "trace_id": self.trace_id,
        }


def answer_box(answer: Answer) -> AnswerBox:
    """Return ``answer`` ready for the page: markers of given sources become links."""
    cited = {citation.document_id for citation in answer.citations}
    listed = {item.get("document_id") for item in answer.closest}
    documents = Document.objects.in_bulk([pk for pk in cited | listed if isinstance(pk, int)])
    first_chunks = _chunk_indexes([cid for c in answer.citations for cid in c.chunk_ids[:1]])
    sources = []
    for citation in answer.citations:
        document = documents.get(citation.document_id)
        if document is None:  # deleted since: cited, but nothing to link
            continue
        url = document_url(document)
        index = first_chunks.get(citation.chunk_ids[0]) if citation.chunk_ids else None
        if index is not None and host_url(document.metadata) is None and url:
            url = f"{url}#chunk-{index}"
        sources.append(Source(citation.number, document.title, url, citation.quote))
    numbers = {source.number for source in sources}
    closest = []
    for item in answer.closest:
        document = documents.get(item.get("document_id"))
        if document is not None:
            closest.append(Source(0, document.title, document_url(document), ""))
    return AnswerBox(
        segments=tuple(_segments(answer.text, numbers)),
        sources=tuple(sources),
        abstained=answer.abstained,
        mode=answer.mode,
        reason=answer.reason,
        closest=tuple(closest),
        trace_id=answer.trace_id,
    )


def _segments(text: str, numbers: set[int]) -> list[tuple[str, int | None]]:
    """Split ``text`` at its ``[n]`` markers; a marker of a listed source is a citation."""
    pieces: list[tuple[str, int | None]] = []
    last = 0
    for marker in _MARKER.finditer(text):
        number = int(marker.group(1))
        if number not in numbers:
            continue
        if marker.start() > last:
            pieces.append((text[last : marker.start()], None))
        pieces.append((marker.group(0), number))
        last = marker.end()
    if last < len(text):
        pieces.append((text[last:], None))
    return pieces


def _chunk_indexes(chunk_ids: list[int]) -> dict[int, int]:
    return dict(Chunk.objects.filter(pk__in=chunk_ids).values_list("pk", "index"))
