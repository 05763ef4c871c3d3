"""PDF files via PyMuPDF: one section per page, split further at outline headings.

Tables ruled on a page are read as rows of ``column: value`` lines (:mod:`.pdf_tables`);
running headers and footers printed on every page are left out (:mod:`.pdf_furniture`);
a paragraph wrapped at the margin is one line, and the page's margin no indentation
(:mod:`.pdf_lines`). A page that goes on inside the part the page before ended in
continues its section, so a chunk may run on over the page turn.

A page with no text layer but images (a scan) is rendered and read by OCR when the
``ocr`` extra is installed (:mod:`.ocr`); without it, a PDF of nothing but such pages
fails naming the extra.

Work per file is bounded: pages and bytes before any page is read (see
:mod:`.pdf_bounds`), and ``MAX_PARSE_SECONDS`` between pages; scanned pages by
``MAX_OCR_PAGES``, counted before the first is read, each image on them by
``MAX_IMAGE_PIXELS``, and ``MAX_OCR_SECONDS`` between them.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import pymupdf

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers import ocr, pdf_lines
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import (
    TextBuilder,
    clip_title,
    file_label,
    first_line,
    nest_heading,
    stem_title,
)
from retrieval.services.parsers.pdf_bounds import check_size
from retrieval.services.parsers.pdf_furniture import drop_running_lines
from retrieval.services.parsers.pdf_lines import one_line
from retrieval.services.parsers.pdf_tables import TableFinder
from retrieval.services.types import ParsedDocument, Section

if TYPE_CHECKING:
    from PIL.Image import Image

# Expand ligatures ("ﬁ" -> "fi") and join words hyphenated across lines, so they match queries.
TEXT_FLAGS = (
    pymupdf.TEXT_DEHYPHENATE | pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
)
#: A first line of more words than this is a wrapped sentence, not a title: a PDF without
#: a metadata title then takes its file's name, as a Word or Markdown file without one does.
TITLE_MAX_WORDS = 12
# A heading may be printed with a number the outline omits: "2.1 Installation".
NUMBER_PREFIX_MAX_CHARS = 8
#: A page with more text than this keeps MuPDF's reading order instead of being sorted by
#: position: sorting is Python work per word (about 0.3 s for a page this full).
SORTED_PAGE_MAX_CHARS = 50_000
#: Highest resolution a scanned page is rendered at for OCR; a page is rendered smaller
#: when its longer side would pass ``ocr.MAX_SIDE`` pixels (an A4 page: at about 256 dpi).
OCR_MAX_DPI = 300

OutlineEntry = tuple[int, str]  # (level, title)


class PdfParser(BaseParser):
    """Read a PDF's text page by page; outline headings give sections their heading paths.

    ``use_outline``: read the outline (bookmarks) for headings; False keeps pages alone.
    """

    mime_types: ClassVar[tuple[str, ...]] = ("application/pdf",)
    extensions: ClassVar[tuple[str, ...]] = (".pdf",)

    def __init__(self, *, use_outline: bool = True, ocr: bool = True, tables: bool = True) -> None:
        self.use_outline = use_outline
        self.ocr = ocr
        self.tables = tables

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the pages' text joined by blank lines, one section per page (or part of one)."""
        label = file_label(filename)
        budget = ParseBudget(label)
        if not data:
            raise ParseError(f"Cannot parse {label}: it is empty.")
        content = _read(data, label, self, budget)
        text, sections = _assemble(drop_running_lines(content.pages), content.outline)
        if not text and content.repaired:
            raise ParseError(f"Cannot parse {label}: the PDF is damaged and has no readable text.")
        if not text:
            found = "OCR found none on its scanned pages" if content.read_scans else "no images"
            raise ParseError(f"Cannot parse {label}: it has no extractable text ({found}).")
        opening = _title_line(text, content.large_lines)
        if _opens_a_part(opening, content.outline):
            opening = ""
        title = clip_title(content.title) or opening or stem_title(filename)
        metadata: dict[str, object] = {"page_count": len(content.pages)}
        if content.scanned:
            key = "ocr_pages" if content.read_scans else "pages_without_text"
            metadata[key] = [index + 1 for index in content.scanned]
        if content.table_pages:
            metadata["table_pages"] = content.table_pages
        return ParsedDocument(text=text, title=title, sections=sections, metadata=metadata)


class _PdfContent(NamedTuple):
    """What the parser needs from an open PDF, read before the document closes."""

    pages: list[str]
    outline: dict[int, list[OutlineEntry]]
    title: str
    repaired: bool
    scanned: list[int]  # 0-based: pages with no text layer but images
    read_scans: bool  # whether OCR read them
    table_pages: list[int]  # 1-based: pages whose tables were read as rows
    large_lines: frozenset[str] | None  # the first page's lines set larger than its text


def _read(data: bytes, label: str, parser: PdfParser, budget: ParseBudget) -> _PdfContent:
    """Return each page's text, the outline entries by page and the metadata title."""
    try:
        document = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError) as e:  # pymupdf.FileDataError is a RuntimeError
        raise ParseError(f"Cannot parse {label}: it is not a readable PDF ({e}).") from e
    with document:
        if document.needs_pass:
            raise ParseError(
                f"Cannot parse {label}: it is encrypted and needs a password; "
                "upload a copy saved without one."
            )
        # MuPDF silently repairs a truncated file and returns what it can; refuse that
        # when the end-of-file marker is missing, rather than index half a document.
        if document.is_repaired and b"%%EOF" not in data:
            raise ParseError(
                f"Cannot parse {label}: it is not a readable PDF (truncated: no end-of-file "
                "marker); upload the complete file."
            )
        try:
            check_size(document, label)
            tables = TableFinder(label, budget, TEXT_FLAGS) if parser.tables else None
            pages = _pages(document, budget, tables)
            scanned = _scanned(document, pages)
            read_scans = bool(scanned) and _read_scans(document, pages, scanned, label, parser.ocr)
            return _PdfContent(
                pages=pages,
                outline=_outline(document) if parser.use_outline else {},
                title=(document.metadata or {}).get("title") or "",
                repaired=bool(document.is_repaired),
                scanned=scanned,
                read_scans=read_scans,
                table_pages=tables.pages if tables else [],
                large_lines=_opening_large_lines(document, pages, scanned),
            )
        except (RuntimeError, ValueError) as e:
            raise ParseError(f"Cannot parse {label}: the PDF is damaged ({e}).") from e


def _pages(
    document: pymupdf.Document, budget: ParseBudget, tables: TableFinder | None
) -> list[str]:
    """Return each page's text, its tables as rows, within the parse budget."""
    pages = []
    for number, page in enumerate(document, start=1):
        budget.check(f"before page {number} of {document.page_count}")
        if tables and (text := tables.page_text(page)) is not None:
            pages.append(text)
            continue
        textpage = page.get_textpage(flags=TEXT_FLAGS)
        text = textpage.extractText()
        if len(text) <= SORTED_PAGE_MAX_CHARS:
            text = page.get_text("text", sort=True, textpage=textpage)
            blocks = textpage.extractDICT(sort=True)["blocks"]
            text = pdf_lines.reflow(text, pdf_lines.running_on(page, blocks))
        pages.append(text)
    return pages


def _scanned(document: pymupdf.Document, pages: list[str]) -> list[int]:
    """Return the indexes of the pages with no text layer that show images: scans."""
    return [
        index
        for index, text in enumerate(pages)
        if not text.strip() and document[index].get_images(full=True)
    ]


def _read_scans(
    document: pymupdf.Document, pages: list[str], scanned: list[int], label: str, use_ocr: bool
) -> bool:
    """Put the text OCR reads on the ``scanned`` pages into ``pages``; return whether it ran.

    Without the ocr extra (or with OCR turned off), the pages are left empty; a PDF with
    no other text then fails naming the extra.
    """
    reason = ocr.unavailable() if use_ocr else "OCR is turned off for PDFs (the ocr option)."
    if reason:
        if not any(text.strip() for text in pages):
            raise ParseError(
                f"Cannot parse {label}: its pages have no text layer (a scanned document?) "
                f"and reading them needs OCR: {reason}"
            )
        return False
    ocr.check_pages(len(scanned), label, "pages with no text layer to read by OCR")
    budget = ocr.budget(label)
    for done, index in enumerate(scanned):
        budget.check(f"before page {index + 1} ({done} of {len(scanned)} scanned pages read)")
        page = document[index]
        for _, _, width, height, *_ in page.get_images(full=True):
            ocr.check_pixels(width, height, label, f"an image on page {index + 1}")
        pages[index] = ocr.read_text(_render(page))
    return True


def _render(page: pymupdf.Page) -> Image:
    """Return the page as a PIL image, at most ``OCR_MAX_DPI`` and ``MAX_IMAGE_PIXELS``."""
    width, height = max(page.rect.width, 1.0), max(page.rect.height, 1.0)
    zoom = min(
        OCR_MAX_DPI / 72,
        ocr.MAX_SIDE / max(width, height),
        (int(retrieval_settings.MAX_IMAGE_PIXELS) / (width * height)) ** 0.5,
    )
    matrix = pymupdf.Matrix(zoom, zoom)
    return page.get_pixmap(matrix=matrix, colorspace=pymupdf.csRGB, alpha=False).pil_image()


def _assemble(
    pages: list[str], outline: dict[int, list[OutlineEntry]]
) -> tuple[str, tuple[Section, ...]]:
    """Return the pages' text and sections, split where outline headings start."""
    builder = TextBuilder()
    stack: list[tuple[int, str]] = []
    path: tuple[str, ...] = ()
    for number, page_text in enumerate(pages, start=1):
        lines = page_text.split("\n")
        segments, path = _split_at_headings(lines, outline.get(number, []), stack, path)
        builder.block_break()
        for index, (start, heading_path) in enumerate(segments):
            end = segments[index + 1][0] if index + 1 < len(segments) else len(lines)
            # A page turned inside a part: chunks may run on (no outline heading opens it).
            builder.open_section(page=number, heading_path=heading_path, continues=not index)
            start = _write_heading(builder, lines, start, end, heading_path)
            builder.write_lines(textwrap.dedent("\n".join(lines[start:end])))
    return builder.build()


def _write_heading(
    builder: TextBuilder, lines: list[str], start: int, end: int, heading_path: tuple[str, ...]
) -> int:
    """Write the segment's opening line as a block of its own if it shows its heading (a
    heading printed right above its text is no part of the paragraph); return the line
    the rest starts at."""
    first = next((i for i in range(start, end) if lines[i].strip()), end)
    if first == end or not heading_path:
        return start
    if not _shows_heading(one_line(lines[first]).casefold(), heading_path[-1].casefold()):
        return start
    builder.block_break()
    builder.write_lines(lines[first].strip())
    builder.block_break()
    return first + 1


def _opening_large_lines(
    document: pymupdf.Document, pages: list[str], scanned: list[int]
) -> frozenset[str] | None:
    """Return the large lines of the first page with text (``None`` if it is a scan)."""
    first = next((index for index, text in enumerate(pages) if text.strip()), None)
    if first is None or first in scanned:
        return None
    return _large_lines(document[first])


def _large_lines(page: pymupdf.Page) -> frozenset[str] | None:
    """Return the lines of ``page`` set larger than most of its text, or ``None`` when it
    has no text layer (a scan: its lines' sizes are unknown)."""
    lines: list[tuple[str, float]] = []
    sizes: dict[float, int] = {}
    for block in page.get_text("dict", flags=TEXT_FLAGS)["blocks"]:
        for line in block.get("lines", ()):
            spans = [span for span in line["spans"] if span["text"].strip()]
            if not spans:
                continue
            for span in spans:
                size = round(span["size"], 1)
                sizes[size] = sizes.get(size, 0) + len(span["text"])
            lines.append((one_line(pdf_lines.line_text(line)), max(s["size"] for s in spans)))
    if not sizes:
        return None
    body = max(sizes, key=lambda size: sizes[size])
    return frozenset(text for text, size in lines if size > body + 0.5)


def _opens_a_part(line: str, outline: dict[int, list[OutlineEntry]]) -> bool:
    """Return whether ``line`` is one of the outline's several top headings: the first
    part's heading, not the document's title (which the others would nest under)."""
    tops = [title for entries in outline.values() for level, title in entries if level == 1]
    return len(tops) > 1 and one_line(line).casefold() in {t.casefold() for t in tops}


def _title_line(text: str, large_lines: frozenset[str] | None) -> str:
    """Return the first line if it reads as a title: set larger than the page's text (as
    titles are, unlike an opening sentence, a label or small print); on a scanned page,
    short and not a sentence or part of one."""
    line = first_line(text)
    if large_lines is not None:
        return line if one_line(line) in large_lines else ""
    if len(line.split()) > TITLE_MAX_WORDS or line.endswith((".", ",", ";", ":")):
        return ""
    return line


def _outline(document: pymupdf.Document) -> dict[int, list[OutlineEntry]]:
    """Return the outline's ``(level, title)`` entries by 1-based page, in order."""
    by_page: dict[int, list[OutlineEntry]] = {}
    for level, title, page, *_ in document.get_toc(simple=True):
        if 1 <= page <= document.page_count and (heading := one_line(title)):
            by_page.setdefault(page, []).append((level, heading))
    return by_page


def _split_at_headings(
    lines: list[str],
    entries: list[OutlineEntry],
    stack: list[tuple[int, str]],
    path: tuple[str, ...],
) -> tuple[list[tuple[int, tuple[str, ...]]], tuple[str, ...]]:
    """Return a page's segments as ``(first line, heading path)``, and the path after it.

    A heading not found on its page applies from the next segment or page on.
    """
    segments = [(0, path)]
    first_text = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    cursor = 0
    for level, title in entries:
        path = nest_heading(stack, level, title)
        found = _find_heading(lines, title, cursor)
        if found is None:
            continue
        if found <= first_text:
            segments[0] = (0, path)
        else:
            segments.append((found, path))
        cursor = found + 1
    return segments, path


def _find_heading(lines: list[str], title: str, start: int) -> int | None:
    """Return the index of the first line from ``start`` that shows ``title``."""
    key = title.casefold()
    for index in range(start, len(lines)):
        if _shows_heading(one_line(lines[index]).casefold(), key):
            return index
    return None


def _shows_heading(line: str, key: str) -> bool:
    """Return whether ``line`` is the heading ``key``, maybe numbered or wrapped."""
    if not line:
        return False
    if line == key:
        return True
    if line.endswith(" " + key):  # "2.1 installation"
        return len(line) - len(key) <= NUMBER_PREFIX_MAX_CHARS
    # The first line of a heading wrapped onto two lines.
    return key.startswith(line + " ") and len(line) * 2 >= len(key)
