"""Cut a document's text into segments, each covered by the same chunks.

Chunks are spans ``content[start:end]``; they may overlap (a chunker with an
``overlap`` option) and may leave gaps (whitespace between paragraphs). Each
segment knows which chunks cover it, which chunks start at it (their anchors) and
whether a new page starts there, so a template can render the text once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.models import Chunk


@dataclass(frozen=True)
class Segment:
    text: str
    chunks: tuple[int, ...]  # indexes of the chunks covering this text
    starts: tuple[int, ...] = ()  # indexes of the chunks starting here
    page: int | None = None  # the page that starts here, if one does

    @property
    def css_class(self) -> str:
        if not self.chunks:
            return ""
        if len(self.chunks) > 1:
            return "retrieval-chunk retrieval-chunk-overlap"
        return f"retrieval-chunk retrieval-chunk-{self.chunks[0] % 2}"

    @property
    def chunk_list(self) -> str:
        return " ".join(str(i) for i in self.chunks)


def segments(text: str, chunks: Sequence[Chunk]) -> list[Segment]:
    """Return ``text`` as consecutive segments annotated with the chunks over them."""
    size = len(text)
    spans = sorted(
        (min(c.start, size), min(max(c.end, c.start), size), c.index, c.page) for c in chunks
    )
    bounds = sorted({0, size, *(s for s, *_ in spans), *(e for _, e, *_ in spans)})
    starts_at: dict[int, list[int]] = {}
    page_at: dict[int, int] = {}
    last_page = None
    for start, _, index, page in spans:
        starts_at.setdefault(start, []).append(index)
        if page is not None and page != last_page:
            page_at.setdefault(start, page)
            last_page = page
    result, active, next_span = [], [], 0
    for left, right in zip(bounds, bounds[1:], strict=False):
        while next_span < len(spans) and spans[next_span][0] <= left:
            active.append(spans[next_span])
            next_span += 1
        active = [span for span in active if span[1] > left]
        result.append(
            Segment(
                text=text[left:right],
                chunks=tuple(sorted(span[2] for span in active)),
                starts=tuple(starts_at.get(left, ())),
                page=page_at.get(left),
            )
        )
    # Chunks of no length (never made by the built-in chunkers) still get an anchor.
    if size and bounds[-1] in starts_at:
        result.append(Segment("", (), tuple(starts_at[bounds[-1]]), page_at.get(bounds[-1])))
    return result
