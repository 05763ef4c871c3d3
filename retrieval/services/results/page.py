"""A page of search results as readers see them: one entry per document, best first.

:func:`results_page` runs one search under the reader's :class:`Scope` and groups its
chunks by document: each document's best chunk leads (its place among the documents is
its ``position``), the document's other matching chunks fold under it. Each chunk gets a
:mod:`snippet <retrieval.services.results.snippets>` around the query's words; each
document a link (:func:`document_url`). Pages hold ``SEARCH_PAGE_SIZE`` documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.urls import NoReverseMatch, reverse

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Chunk, Collection, Document
from retrieval.services.access import Scope
from retrieval.services.query.search import search
from retrieval.services.registry import analyzers
from retrieval.services.results.facets import Facet, facet_counts, facet_filter
from retrieval.services.results.snippets import Snippet, snippet
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.types import RetrievalResult

#: Chunks searched per document shown: a document's other matching chunks take places
#: in the ranking, so a page of N documents needs more than N chunks.
CHUNKS_PER_DOCUMENT = 4
#: The last page a reader may ask for (the search behind it ranks page x size x 4 chunks).
MAX_PAGES = 20


@dataclass(frozen=True)
class Hit:
    """One matching chunk of a document, with its rank among the search's chunks (1-based)."""

    chunk: Chunk
    rank: int
    score: float
    snippet: Snippet
    promoted: bool = False
    url: str = ""  # where following this chunk leads

    def to_dict(self) -> dict[str, Any]:
        chunk = self.chunk
        return {
            "chunk_id": chunk.pk,
            "chunk_index": chunk.index,
            "rank": self.rank,
            "score": self.score,
            "page": chunk.page,
            "heading_path": list(chunk.heading_path),
            "snippet": self.snippet.to_dict(),
            "promoted": self.promoted,
            "url": self.url,
        }


@dataclass(frozen=True)
class ResultGroup:
    """A document among the results: its best chunk and its other matching ones."""

    document: Document
    position: int
    url: str
    best: Hit
    more: tuple[Hit, ...] = ()

    @property
    def title(self) -> str:
        return self.document.title or self.document.external_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "document_id": self.document.pk,
            "document": self.document.external_id,
            "title": self.title,
            "url": self.url,
            "best": self.best.to_dict(),
            "more": [hit.to_dict() for hit in self.more],
        }


@dataclass(frozen=True)
class ResultsPage:
    """One page of a search's documents, the facets around it and the search's trace id
    (``None`` when the search was not kept: then its clicks cannot be recorded)."""

    query: str
    collection: Collection
    number: int
    groups: tuple[ResultGroup, ...]
    has_next: bool
    facets: tuple[Facet, ...] = ()
    trace_id: int | None = None


def page_size() -> int:
    """Return ``SEARCH_PAGE_SIZE``: documents per page of results."""
    return max(1, int(retrieval_settings.SEARCH_PAGE_SIZE))


def results_page(
    query: str,
    *,
    collection: Collection | str,
    scope: Scope,
    number: int = 1,
    selected: Mapping[str, str] | None = None,
) -> ResultsPage:
    """Search ``collection`` for ``query`` as ``scope`` may and return page ``number``.

    ``selected`` maps facet keys (``SEARCH_PAGE_FACETS``) to the value the reader chose:
    the search keeps documents with that metadata value. A hidden collection raises
    :class:`CollectionNotFound` as a missing one does; a page out of range ``ValueError``.
    """
    if not 1 <= number <= MAX_PAGES:
        raise ValueError(f"The page must be a whole number from 1 to {MAX_PAGES}.")
    target = scope.collection(collection)
    facets = facet_counts(target, scope=scope, selected=selected or {})
    metadata = facet_filter(facets)
    size = page_size()
    results = search(
        query,
        collection=target,
        scope=scope,
        top_k=number * size * CHUNKS_PER_DOCUMENT,
        filters={"metadata": metadata} if metadata else None,
    )
    chunks_of = by_document(list(results))
    first = (number - 1) * size
    return ResultsPage(
        query=query,
        collection=target,
        number=number,
        groups=result_groups(chunks_of[first : first + size], query, first=first + 1),
        has_next=len(chunks_of) > first + size,
        facets=facets,
        trace_id=results.trace_id,
    )


def by_document(results: list[RetrievalResult]) -> list[list[RetrievalResult]]:
    """Return ``results`` (best first) as each document's, in the order of each
    document's best chunk."""
    grouped: dict[int, list[RetrievalResult]] = {}
    for result in results:
        grouped.setdefault(result.chunk.document_id, []).append(result)
    return list(grouped.values())


def result_groups(
    documents: list[list[RetrievalResult]], query: str, *, first: int = 1
) -> tuple[ResultGroup, ...]:
    """Return the documents' results (from :func:`by_document`) as groups with snippets
    and links, numbered from position ``first``."""
    analyze = _analyzer().terms
    terms = frozenset(analyze(query))
    groups = []
    for position, chunks in enumerate(documents, start=first):
        document = chunks[0].chunk.document
        url = document_url(document)
        # The app's own page shows every chunk: link to the one that matched.
        anchored = bool(url) and host_url(document.metadata) is None
        hits = [
            Hit(
                chunk=result.chunk,
                rank=result.rank + 1,
                score=result.score,
                snippet=snippet(result.chunk.content, terms, analyze),
                promoted=bool(result.metadata.get("promoted")),
                url=f"{url}#chunk-{result.chunk.index}" if anchored else url,
            )
            for result in chunks
        ]
        groups.append(
            ResultGroup(
                document=document, position=position, url=url, best=hits[0], more=tuple(hits[1:])
            )
        )
    return tuple(groups)


def document_positions(results: list[Mapping[str, Any]]) -> dict[int, int]:
    """Return each document's position (1-based) among a trace's ranked ``results``, as
    :func:`by_document` orders them."""
    positions: dict[int, int] = {}
    for record in sorted(results, key=lambda r: r.get("rank", 0)):
        document_id = record.get("document_id")
        if isinstance(document_id, int) and document_id not in positions:
            positions[document_id] = len(positions) + 1
    return positions


def document_url(document: Document) -> str:
    """Return where a result links: the host object's page (``metadata["url"]``, an
    http(s) URL or a path of the site) if it has one, else the app's document page."""
    url = host_url(document.metadata)
    if url is not None:
        return url
    try:
        return reverse("retrieval:document", args=[document.pk])
    except NoReverseMatch:  # a site that mounts the API without the pages
        return ""


def host_url(metadata: Any) -> str | None:
    """Return ``metadata["url"]`` if a link may point there (never ``javascript:`` and the like)."""
    url = metadata.get("url") if isinstance(metadata, Mapping) else None
    if not isinstance(url, str) or not url or url != url.strip() or len(url) > 2000:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme in ("http", "https") and parts.netloc:
        return url
    if not parts.scheme and url.startswith("/") and not url.startswith(("//", "/\\")):
        return url
    return None


def _analyzer() -> Analyzer:
    """The BM25 leg's default analyzer, so marked words are the words it matched."""
    try:
        return analyzers["default"]
    except (RetrievalError, ValueError):  # no stemmer installed: plain words still mark
        return Analyzer(language=None, stopwords=None)
