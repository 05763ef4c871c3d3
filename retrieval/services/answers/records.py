"""What an answer is: its text, the passages it cites, and whether it abstained."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from retrieval.services.query.packing import Citation
from retrieval.services.types import RetrievalResult


@dataclass(frozen=True)
class AnswerCitation:
    """A passage the answer cites as ``[number]``: where it is and the words it stands on.

    ``url`` is the document's ``metadata["url"]`` when it has one; ``quote`` the sentence
    of the passage that the citing sentence rests on.
    """

    number: int
    document_id: int
    external_id: str
    title: str
    url: str
    chunk_ids: tuple[int, ...]
    start: int
    end: int
    page: int | None
    quote: str

    @classmethod
    def of(cls, citation: Citation, *, url: str, quote: str) -> AnswerCitation:
        return cls(
            number=citation.number,
            document_id=citation.document_id,
            external_id=citation.external_id,
            title=citation.title,
            url=url,
            chunk_ids=citation.chunk_ids,
            start=citation.start,
            end=citation.end,
            page=citation.page,
            quote=quote,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "document_id": self.document_id,
            "document": self.external_id,
            "title": self.title,
            "url": self.url,
            "chunk_ids": list(self.chunk_ids),
            "start": self.start,
            "end": self.end,
            "page": self.page,
            "quote": self.quote,
        }


@dataclass(frozen=True)
class Answer:
    """A grounded answer to a question.

    ``mode`` is ``"llm"`` (the configured model wrote it), ``"extractive"`` (sentences
    of the passages, chosen without a model) or ``"retrieval"`` (it abstained before
    either, retrieval having found nothing good enough); ``reason`` says why it abstained or why
    an LLM's answer was replaced by the extractive one. ``closest`` lists the documents
    retrieval found when it abstained. ``trace_id`` is the stored
    :class:`~retrieval.models.QueryTrace` (``None`` when not sampled).
    """

    question: str
    text: str
    citations: tuple[AnswerCitation, ...]
    abstained: bool
    mode: str
    reason: str = ""
    #: Sentences of the answer that cite no passage.
    uncited: tuple[str, ...] = ()
    closest: tuple[dict[str, Any], ...] = ()
    results: list[RetrievalResult] = field(default_factory=list, repr=False)
    trace: dict[str, Any] = field(default_factory=dict, repr=False)
    trace_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the answer as the API and ``--json`` show it (the trace by its id)."""
        return {
            "question": self.question,
            "text": self.text,
            "citations": [citation.to_dict() for citation in self.citations],
            "abstained": self.abstained,
            "mode": self.mode,
            "reason": self.reason,
            "uncited": list(self.uncited),
            "closest": list(self.closest),
            "trace_id": self.trace_id,
        }
