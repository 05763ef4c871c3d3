"""How much work a PDF asks for, measured before any of its pages is read.

MuPDF interprets a page's content streams, and each form (a Form XObject) every time
it is drawn, in C while holding the GIL: nothing can interrupt it from Python. So
the work is counted first, and a PDF over a limit is refused, naming it:

- ``MAX_PDF_PAGES`` pages;
- ``MAX_PDF_DECOMPRESSED_BYTES`` bytes, both of its streams decoded once each
  (contents, forms, fonts; images and attached files are never decoded for text)
  and of what drawing its pages interprets, a form counted each time it is drawn
  (a 3 kB file whose forms each draw the next one ten times, nine deep, asks for 10^8
  draws).
"""

from __future__ import annotations

import re
from collections import Counter

import pymupdf
from pymupdf import mupdf

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError

#: Bytes of a stream decoded at a time while measuring it.
DECODE_PIECE_BYTES = 1024 * 1024
#: Streams text extraction never decodes: images, attached files.
UNREAD_STREAMS = {"Subtype": "/Image", "Type": "/EmbeddedFile"}
#: Forms drawing forms deeper than this are refused (real files nest a few levels).
MAX_FORM_NESTING = 64
#: What drawing a form costs besides its bytes, in bytes: MuPDF sets up a draw (graphics
#: state, resources, clip) in about the time it interprets 32 bytes of text operators.
FORM_DRAW_BYTES = 32

_DELIMITER = rb"\s/\[\]()<>{}%"
#: ``/Name Do`` in a content stream (a name inside a string counts too: an overcount).
_DRAW = re.compile(rb"/([^" + _DELIMITER + rb"]+)\s*Do(?![^" + _DELIMITER + rb"])")
#: The ``d0`` operator: a Type 3 glyph drawn in colour, not cached, run at every showing.
_COLOURED_GLYPH = re.compile(rb"(?<![^" + _DELIMITER + rb"])d0(?![^" + _DELIMITER + rb"])")
#: A string a content stream may show, each byte at most one glyph: ``(...)`` or ``<...>``.
_SHOWN = re.compile(rb"\((?:[^()\\]|\\.)*\)|<[0-9A-Fa-f\s]*>")
#: ``/Name 12 0 R`` in a resource dictionary as pymupdf prints it.
_REFERENCE = re.compile(r"/([^\s/\[\]()<>{}%]+)\s*(\d+)\s+\d+\s+R")


def check_size(document: pymupdf.Document, label: str) -> None:
    """Raise ``ParseError`` if ``document`` is over ``MAX_PDF_PAGES`` or its byte limit,
    or has pages but no objects."""
    if document.page_count and document.xref_length() < 2:
        # MuPDF's repair of some non-PDF bytes gives pages with no object behind them;
        # looking a page's object up then crashes the process (pymupdf 1.26, MuPDF 1.26).
        raise ParseError(f"Cannot parse {label}: it is not a PDF (it has no objects).")
    max_pages = int(retrieval_settings.MAX_PDF_PAGES)
    if document.page_count > max_pages:
        raise ParseError(
            f"Cannot parse {label}: it has {document.page_count} pages; the limit is "
            f"{max_pages} (MAX_PDF_PAGES). Split it into smaller files."
        )
    limit = int(retrieval_settings.MAX_PDF_DECOMPRESSED_BYTES)
    sizes = _stream_sizes(document, stop_after=limit)
    if sum(sizes.values()) > limit:
        raise _too_large(label, limit, "its streams decompress to")
    if _Drawing(document, sizes, label).total(stop_after=limit) > limit:
        raise _too_large(label, limit, "drawing its pages interprets")


def _too_large(label: str, limit: int, what: str) -> ParseError:
    return ParseError(
        f"Cannot parse {label}: {what} more than {limit} bytes (MAX_PDF_DECOMPRESSED_BYTES); "
        "it may be a compression bomb, or split it into smaller files."
    )


def _stream_sizes(document: pymupdf.Document, *, stop_after: int) -> dict[int, int]:
    """Return the decoded size of each stream text extraction may read, by xref.

    Each goes through MuPDF's filters (any compression, decryption) and is discarded
    a piece at a time; the count stops once the sizes add up past ``stop_after``.
    """
    pdf = mupdf.pdf_document_from_fz_document(document.this)
    sizes: dict[int, int] = {}
    total = 0
    for xref in range(1, document.xref_length()):
        if not document.xref_is_stream(xref) or any(
            document.xref_get_key(xref, key)[1] == value for key, value in UNREAD_STREAMS.items()
        ):
            continue
        size = 0
        try:
            stream = mupdf.pdf_open_stream_number(pdf, xref)
            while total + size <= stop_after:
                if not (read := mupdf.fz_skip(stream, DECODE_PIECE_BYTES)):
                    break
                size += read
        except mupdf.FzErrorBase:  # a broken stream: extraction cannot read it either
            continue
        sizes[xref] = size
        total += size
        if total > stop_after:
            break
    return sizes


class _Drawing:
    """The bytes MuPDF interprets to draw pages: contents, forms each time drawn, annotations.

    Type 3 fonts draw glyphs with content streams (CharProcs): a glyph declared with
    ``d1`` is drawn once and cached, one with ``d0`` every time it is shown (counted once
    per byte of the strings of the stream showing it: codes are at least a byte).
    """

    def __init__(self, document: pymupdf.Document, sizes: dict[int, int], label: str) -> None:
        self.document, self.sizes, self.label = document, sizes, label
        self.resources: dict[tuple[int, str], dict[str, int] | None] = {}
        self.costs: dict[tuple[int, int], int] = {}
        self.contents: dict[int, bytes] = {}
        self.glyphs: dict[int, int] = {}  # Type 3 font -> cost of showing one glyph
        self.once = 0  # cached glyphs, drawn once whatever shows them

    def total(self, *, stop_after: int) -> int:
        """Return the bytes drawing every page interprets, or a count past ``stop_after``."""
        total = 0
        for page in self.document:
            holder = self._page_resources(page.xref)
            streams = [*page.get_contents(), *self._appearances(page)]
            total += sum(self._cost(xref, holder, ()) for xref in streams)
            if total + self.once > stop_after:
                break
        return total + self.once

    def _cost(self, xref: int, holder: int, drawing: tuple[int, ...]) -> int:
        """Bytes interpreted drawing stream ``xref`` once, its names resolved in ``holder``."""
        if self._named(xref, "XObject") is not None:
            holder = xref  # a form with its own resources
        key = (xref, holder)
        if key not in self.costs:
            if len(drawing) > MAX_FORM_NESTING:
                raise ParseError(
                    f"Cannot parse {self.label}: its forms draw forms more than "
                    f"{MAX_FORM_NESTING} levels deep."
                )
            drawing = (*drawing, xref)
            cost = self.sizes.get(xref, 0)
            if glyph := self._glyph_cost(holder, drawing):
                cost += glyph * sum(len(text) for text in _SHOWN.findall(self._content(xref)))
            names = self._named(holder, "XObject") or {}
            for name, count in Counter(_DRAW.findall(self._content(xref))).items():
                form = names.get(name.decode("latin-1"))
                # MuPDF skips a form already being drawn (a cycle).
                if form is not None and form not in drawing and self._is_form(form):
                    cost += count * (FORM_DRAW_BYTES + self._cost(form, holder, drawing))
            self.costs[key] = cost
        return self.costs[key]

    def _glyph_cost(self, holder: int, drawing: tuple[int, ...]) -> int:
        """Return the most a glyph of ``holder``'s Type 3 fonts costs each time it is shown."""
        most = 0
        for font in (self._named(holder, "Font") or {}).values():
            if font in drawing or self.document.xref_get_key(font, "Subtype")[1] != "/Type3":
                continue
            if font not in self.glyphs:
                self.glyphs[font] = 0  # a font whose glyphs show the font: not again
                font_holder = font if self._named(font, "XObject") is not None else holder
                kind, value = self.document.xref_get_key(font, "CharProcs")
                if kind == "xref":
                    value = self.document.xref_object(int(value.split()[0]), compressed=True)
                for _, number in _REFERENCE.findall(value if kind in ("dict", "xref") else ""):
                    proc = int(number)
                    cost = self._cost(proc, font_holder, (*drawing, font))
                    if _COLOURED_GLYPH.search(self._content(proc)):
                        self.glyphs[font] = max(self.glyphs[font], cost)
                    else:
                        self.once += cost
            most = max(most, self.glyphs[font])
        return most

    def _content(self, xref: int) -> bytes:
        """Return stream ``xref`` decoded, if it was measured (so within the limit)."""
        if xref not in self.contents:
            content = b""
            if xref in self.sizes:
                pdf = mupdf.pdf_document_from_fz_document(self.document.this)
                try:  # what decodes before an error, as the interpreter would read it
                    stream = mupdf.pdf_open_stream_number(pdf, xref)
                    found, _ = mupdf.fz_read_best(stream, 0, self.sizes[xref] + 1)
                    content = mupdf.fz_buffer_extract(found)
                except mupdf.FzErrorBase:
                    pass
            self.contents[xref] = content
        return self.contents[xref]

    def _is_form(self, xref: int) -> bool:
        return self.document.xref_get_key(xref, "Subtype")[1] == "/Form"

    def _page_resources(self, xref: int) -> int:
        """Return the xref whose resources a page uses: its own, or inherited from a parent."""
        holder = xref
        for _ in range(MAX_FORM_NESTING):
            if self._named(holder, "XObject") is not None:
                return holder
            kind, value = self.document.xref_get_key(holder, "Parent")
            if kind != "xref":
                break
            holder = int(value.split()[0])
        return xref

    def _named(self, xref: int, category: str) -> dict[str, int] | None:
        """Return the ``category`` resources (XObject, Font) of ``xref`` by name; None if it
        has no resources at all (a form then uses those of what draws it)."""
        if (xref, category) not in self.resources:
            found: dict[str, int] | None = None
            if self.document.xref_get_key(xref, "Resources")[0] != "null":
                kind, value = self.document.xref_get_key(xref, f"Resources/{category}")
                if kind == "xref":
                    value = self.document.xref_object(int(value.split()[0]), compressed=True)
                text = value if kind in ("dict", "xref") else ""
                found = {name: int(number) for name, number in _REFERENCE.findall(text)}
            self.resources[(xref, category)] = found
        return self.resources[(xref, category)]

    def _appearances(self, page: pymupdf.Page) -> list[int]:
        """Return the appearance streams of the page's annotations and form fields."""
        streams = []
        for annotation, *_ in page.annot_xrefs():
            kind, value = self.document.xref_get_key(annotation, "AP/N")
            if kind == "xref":
                streams.append(int(value.split()[0]))
            elif kind == "dict":  # one appearance per state (a check box's on and off)
                streams.extend(int(number) for _, number in _REFERENCE.findall(value))
        return streams
