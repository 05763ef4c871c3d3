"""Preparing a source for indexing, before the embedder and the database see it.

:meth:`Preparation.prepare` parses the source, chunks its text, gives each chunk its
page, heading path and contextual header (:mod:`retrieval.services.core.headers`)
and analyses what BM25 will index. Nothing is written: a source that fails here
fails alone, and :mod:`retrieval.services.ingestion.ingest` embeds and stores the rest.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import mimetypes
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError, RetrievalError
from retrieval.models import Chunk, Collection
from retrieval.services.chunkers.base import BaseChunker
from retrieval.services.chunkers.recursive import only_heading
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.core.headers import (
    ContextOptions,
    context_options,
    context_prefix,
    indexed_text,
    opening_sentence,
)
from retrieval.services.embedders.base import BaseEmbedder
from retrieval.services.ingestion.parsing import parse
from retrieval.services.registry import analyzers, chunkers, embedders
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.sparse.index import bm25_text
from retrieval.services.types import ChunkSpan, ParsedDocument, Section
from retrieval.validation.storable import NUL, refuse_unstorable


@dataclass(frozen=True)
class Source:
    """Raw content to ingest as one document of a collection."""

    external_id: str
    data: bytes
    filename: str | None = None
    mime_type: str | None = None
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    source_path: str = ""
    #: The storage name of the document's stored upload the data was read from, if any:
    #: deleted when it cannot be parsed (it could never be indexed).
    stored_file: str = ""
    #: Who may see the document (``Document.access``, services.visibility), decided by a
    #: host object; ``None`` keeps what the document has (a new one: no restriction).
    access: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        refuse_unstorable(self.external_id, "external_id")  # a failed document is kept by it

    @classmethod
    def from_path(
        cls, path: Path, *, external_id: str, metadata: dict[str, Any] | None = None
    ) -> Source:
        """Read a file; the MIME type is guessed from its name."""
        return cls(
            external_id=external_id,
            data=path.read_bytes(),
            filename=path.name,
            mime_type=mimetypes.guess_type(path.name)[0],
            metadata=metadata or {},
            source_path=str(path),
        )

    @classmethod
    def from_text(
        cls,
        text: str,
        *,
        external_id: str,
        title: str = "",
        metadata: dict[str, Any] | None = None,
        access: tuple[str, ...] | None = None,
    ) -> Source:
        return cls(
            external_id=external_id,
            data=text.encode("utf-8"),
            mime_type="text/plain",
            title=title,
            metadata=metadata or {},
            access=access,
        )

    def describes(self, document: Any) -> bool:
        """True if ``document`` already has what this source says beside its text:
        its title, metadata, path and visibility (a host object's URL after a move)."""
        if self.title and self.title[:1000] != document.title:
            return False
        stored = document.metadata or {}
        if any(key not in stored or stored[key] != value for key, value in self.metadata.items()):
            return False
        if self.source_path and self.source_path != document.source_path:
            return False
        if self.access is None:
            return True
        return document.access is not None and sorted(self.access) == sorted(document.access)

    @property
    def fallback_title(self) -> str:
        """The title of a document whose source and parser name none: its file's stem."""
        return Path(self.filename or self.external_id).stem

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class PreparedDocument:
    """A source parsed and chunked: its chunk rows (not saved) and their BM25 terms."""

    source: Source
    parsed: ParsedDocument
    title: str
    mime_type: str
    rows: list[Chunk]
    terms: list[tuple[Counter[str], int]]  # per row: BM25 term frequencies, length


@dataclass(frozen=True)
class Preparation:
    """How a collection's sources are prepared: its chunker, the BM25 analyzer, the
    chunk header's options, the encoding chunks' tokens are counted in and, when
    chunks are fitted to it, the embedder whose window they must fit."""

    collection: Collection
    chunker: BaseChunker
    analyzer: Analyzer
    context: ContextOptions
    encoding: str
    embedder: BaseEmbedder | None = None

    @classmethod
    def of(cls, collection: Collection) -> Preparation:
        """Read the settings now; a bad ``CHUNK_CONTEXT`` raises ImproperlyConfigured."""
        embedder = None
        if retrieval_settings.FIT_EMBEDDER_WINDOW:
            embedder = embedders[collection.embedder]
            if embedder.max_input_tokens is None:
                embedder = None
        return cls(
            collection,
            chunkers[chunker_alias(collection)],
            analyzers["default"],
            context_options(),
            retrieval_settings.TOKEN_ENCODING,
            embedder,
        )

    def prepare(self, source: Source) -> PreparedDocument:
        """Parse and chunk ``source``; raise if it cannot be read or holds no text."""
        parsed, parser = parse(source.data, filename=source.filename, mime_type=source.mime_type)
        # PostgreSQL text cannot hold NUL; U+FFFD keeps every offset.
        text = parsed.text.replace(NUL, "\ufffd")
        if not text.strip():
            raise ParseError("the file has no text to index")
        parsed = ParsedDocument(
            text=text, title=parsed.title, sections=parsed.sections, metadata=parsed.metadata
        )
        title = source.title or parsed.title or source.fallback_title
        title = title[:1000]
        metadata = {**parsed.metadata, **source.metadata}
        refuse_unstorable(title, "The title", RetrievalError)
        refuse_unstorable(metadata, "The metadata", RetrievalError)
        # A file's external id is its path (retrieval_ingest: relative to the folder's
        # parent), which names the topic, as a title does; text sources have none.
        path = source.external_id if source.source_path or source.filename else ""
        section_starts = [section.start for section in parsed.sections]

        def structure(span: ChunkSpan) -> dict[str, Any]:
            return _structure_at(text, parsed.sections, section_starts, span)

        summary, opening_start, opening_end = "", 0, 0
        if self.context.get("summary"):
            headings = [h for section in parsed.sections for h in section.heading_path[-1:]]
            summary, opening_start, opening_end = opening_sentence(text, [title, *headings])

        def header(span: ChunkSpan) -> str:
            heading_path = structure(span)["heading_path"]
            # A chunk holding the opening paragraph says it already.
            opens = span.start < opening_end and opening_start < span.end
            return context_prefix(
                title,
                heading_path,
                metadata,
                self.context,
                source=path,
                summary="" if opens else summary,
            )

        spans = self.chunker.chunk(text, sections=parsed.sections)
        if self.embedder is not None:
            spans = self.fit_window(text, spans, header)
        rows = [
            Chunk(
                collection=self.collection,
                index=i,
                content=text[span.start : span.end],
                start=span.start,
                end=span.end,
                token_count=count_tokens(text[span.start : span.end], self.encoding),
                indexed_prefix=header(span),
                **structure(span),
            )
            for i, span in enumerate(spans)
        ]
        terms = [self.analyzer.term_counts(bm25_text(r.indexed_prefix, r.content)) for r in rows]
        mime_type = source.mime_type or parser.default_mime_type
        return PreparedDocument(source, parsed, title, mime_type, rows, terms)

    def fit_window(
        self, text: str, spans: list[ChunkSpan], header: Callable[[ChunkSpan], str]
    ) -> list[ChunkSpan]:
        """Split the chunks whose header and text the embedder would truncate.

        The model reads ``max_input_tokens`` of its own tokens (all-MiniLM-L6-v2: 256
        word pieces, [CLS] and [SEP] included) and drops the rest, while chunks are
        sized in ``TOKEN_ENCODING`` tokens, of which code and identifiers take more word
        pieces, and before their header is added: a chunk over the window is split by
        its chunker into parts that fit, each with its own header.
        """
        assert self.embedder is not None
        window = self.embedder.max_input_tokens or 0
        for _ in range(3):  # a part may still overflow where word pieces are dense
            headers = [header(span) for span in spans]
            texts = [text[span.start : span.end] for span in spans]
            counts = self.embedder.count_input_tokens(
                [indexed_text(h, t) for h, t in zip(headers, texts, strict=True)]
            )
            if all(count <= window for count in counts):
                break
            over = {i for i, count in enumerate(counts) if count > window}
            header_counts = dict(
                zip(over, self.embedder.count_input_tokens([headers[i] for i in over]), strict=True)
            )
            fitted: list[ChunkSpan] = []
            for i, span in enumerate(spans):
                room = window - header_counts.get(i, 0) - 2  # the blank line, a margin
                content = counts[i] - header_counts.get(i, 0)
                if i not in over or room < window // 4 or content <= 0:
                    fitted.append(span)  # fits, or its header leaves too little room
                    continue
                # Parts of even size: a full part and a scrap would leave the scrap's
                # vector mostly its header.
                fraction = min(room / content, 1.15 / math.ceil(content / room))
                parts = self.chunker.split_span(text, span.start, span.end, fraction=fraction)
                fitted.extend(parts)
            if len(fitted) == len(spans):
                break
            spans = fitted
        return spans


def chunker_alias(collection: Collection) -> str:
    """Return the alias of the chunker that cuts ``collection``'s documents."""
    return collection.chunker or retrieval_settings.DEFAULT_CHUNKER


def _structure_at(
    text: str, sections: Sequence[Section], starts: Sequence[int], span: ChunkSpan
) -> dict[str, Any]:
    """Return the page and heading path of the section containing the chunk's start.

    A chunk that starts with sections holding only their heading (a chapter heading
    right before its first subsection) takes the structure of the section its body
    is in.
    """
    i = bisect.bisect_right(starts, span.start) - 1
    if i < 0 or span.start >= sections[i].end:
        return {"page": None, "heading_path": []}
    while (
        i + 1 < len(sections)
        and sections[i + 1].start < span.end
        and not text[sections[i].end : sections[i + 1].start].strip()
        and only_heading(text[sections[i].start : sections[i].end], sections[i].heading_path)
    ):
        i += 1
    return {"page": sections[i].page, "heading_path": list(sections[i].heading_path)}
