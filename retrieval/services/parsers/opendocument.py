"""OpenDocument text, presentations and spreadsheets (``.odt``, ``.odp``, ``.ods``).

``content.xml`` is read through ``defusedxml`` under the archive limits, as the Office
Open XML parts are (:mod:`.packages`), rather than through odfpy, which parses with the
standard library's SAX reader and builds a second tree of its own. A text's headings
(``text:h`` and their outline level) open sections, its lists keep their markers, its
code (paragraphs of a preformatted style, one a line) keeps its lines and indentation, its
notes and comments follow the paragraph that cites them; a presentation's pages are
sections as PowerPoint slides are (title, text, tables, notes); a spreadsheet's tables
are sections of ``column: value`` rows as Excel sheets are, under ``MAX_SHEETS`` and
``MAX_TABLE_CELLS`` (a repeated row or cell counts as many times as it repeats; empty
ones at the end of a sheet, which office suites write by the million, are not read).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar
from xml.etree.ElementTree import Element

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import (
    clip_title,
    nest_heading,
    stem_title,
)
from retrieval.services.parsers.packages import Package, PackageParser
from retrieval.services.parsers.powerpoint import check_slide_count
from retrieval.services.parsers.tables import TableWriter
from retrieval.services.types import ParsedDocument

_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_DC = "{http://purl.org/dc/elements/1.1/}"
#: The paragraph style of code (LibreOffice's "Preformatted Text", which pandoc writes).
PREFORMATTED = "Preformatted_20_Text"
#: Spaces one ``text:s`` gives at most in code (its count is the file's to declare).
MAX_SPACES = 200
#: Blocks read between checks of ``MAX_PARSE_SECONDS``.
BLOCKS_PER_CHECK = 500
#: Generated lists that repeat the document's own text.
_SKIPPED = {
    _TEXT + name
    for name in ("table-of-content", "alphabetical-index", "sequence-decls", "tracked-changes")
}
#: A page's frames that are the master page's furniture.
_FURNITURE = ("date-time", "footer", "header", "page-number")
_ROW_GROUPS = {_TABLE + name for name in ("table-header-rows", "table-rows", "table-row-group")}


class _OpenDocumentParser(PackageParser):
    """Open the container and read ``content.xml``'s body of ``body`` kind."""

    kind: ClassVar[str] = ""
    body: ClassVar[str] = ""

    def read(self, data: bytes, *, label: str, filename: str | None) -> ParsedDocument:
        """Return the document's text with its sections."""
        budget = ParseBudget(label)
        parts = ("content.xml",)
        with Package(data, label=label, kind=self.kind, parts=parts, budget=budget) as package:
            content = package.xml("content.xml")
            body = (
                content.find(f"{_OFFICE}body/{_OFFICE}{self.body}") if content is not None else None
            )
            if body is None:
                raise ParseError(f"Cannot parse {label}: it is not {self.kind} (no {self.body}).")
            styles = [content, package.xml("styles.xml")]
            meta = package.xml("meta.xml")
            writer = TableWriter(label, budget)
            first_heading, metadata = self.read_body(body, writer, _Styles(styles))
        text, sections = writer.builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: it has no text.")
        declared = meta.findtext(f"{_OFFICE}meta/{_DC}title", "") if meta is not None else ""
        return ParsedDocument(
            text=text,
            title=clip_title(declared) or first_heading or stem_title(filename),
            sections=sections,
            metadata=metadata,
        )

    def read_body(
        self, body: Element, tables: TableWriter, styles: _Styles
    ) -> tuple[str, dict[str, object]]:
        """Write ``body`` into ``tables.builder``; return its first heading and metadata."""
        raise NotImplementedError


class OdtParser(_OpenDocumentParser):
    """Read an OpenDocument text: headings as sections, lists, tables, notes."""

    mime_types: ClassVar[tuple[str, ...]] = ("application/vnd.oasis.opendocument.text",)
    extensions: ClassVar[tuple[str, ...]] = (".odt",)
    kind = "an OpenDocument text"
    body = "text"

    def read_body(
        self, body: Element, tables: TableWriter, styles: _Styles
    ) -> tuple[str, dict[str, object]]:
        reader = _TextReader(tables, styles)
        tables.builder.open_section()
        reader.blocks(body)
        return reader.first_heading, {"format": "odt"}


class OdpParser(_OpenDocumentParser):
    """Read an OpenDocument presentation: a section per slide, titled, with its notes."""

    mime_types: ClassVar[tuple[str, ...]] = ("application/vnd.oasis.opendocument.presentation",)
    extensions: ClassVar[tuple[str, ...]] = (".odp",)
    kind = "an OpenDocument presentation"
    body = "presentation"

    def read_body(
        self, body: Element, tables: TableWriter, styles: _Styles
    ) -> tuple[str, dict[str, object]]:
        pages = body.findall(_DRAW + "page")
        check_slide_count(len(pages), tables.label)
        reader = _TextReader(tables, styles)
        first_title = ""
        for number, page in enumerate(pages, start=1):
            tables.budget.check(f"before slide {number}")
            frames = list(page.iter(_DRAW + "frame"))
            title = next((clip_title(_text(f)) for f in frames if _class(f) == "title"), "")
            first_title = first_title or title
            reader.builder.open_section(heading_path=(title or f"Slide {number}",), page=number)
            if title:
                reader.builder.write_lines(title)
            for frame in frames:
                if _class(frame) not in ("title", "notes", *_FURNITURE):
                    reader.blocks(frame)
            notes = page.find(_PRESENTATION + "notes")
            if notes is not None and (text := _text(notes)):
                reader.builder.block_break()
                reader.builder.write(f"Notes: {text}")
            reader.builder.block_break()
        return first_title, {"format": "odp", "slides": len(pages)}


class OdsParser(_OpenDocumentParser):
    """Read an OpenDocument spreadsheet: a section per sheet of ``column: value`` rows."""

    mime_types: ClassVar[tuple[str, ...]] = ("application/vnd.oasis.opendocument.spreadsheet",)
    extensions: ClassVar[tuple[str, ...]] = (".ods",)
    kind = "an OpenDocument spreadsheet"
    body = "spreadsheet"

    def read_body(
        self, body: Element, tables: TableWriter, styles: _Styles
    ) -> tuple[str, dict[str, object]]:
        sheets = body.findall(_TABLE + "table")
        max_sheets = int(retrieval_settings.MAX_SHEETS)
        if len(sheets) > max_sheets:
            raise ParseError(
                f"Cannot parse {tables.label}: it has {len(sheets)} sheets; the limit is "
                f"{max_sheets} (MAX_SHEETS). Split it into smaller files."
            )
        for number, sheet in enumerate(sheets, start=1):
            name = sheet.get(_TABLE + "name", "") or f"Sheet {number}"
            tables.budget.check(f"before sheet {name!r}")
            tables.write_section(_rows(sheet, tables), heading_path=(name,))
        return "", {"format": "ods", "sheets": len(sheets)}


class _Styles:
    """Which list levels are numbered, by list style name, and which paragraph styles are
    preformatted text (code), from the automatic and the common styles."""

    def __init__(self, roots: list[Element | None]) -> None:
        self.numbered: dict[tuple[str, int], bool] = {}
        parents: dict[str, str] = {}
        for root in roots:
            for style in root.iter(_TEXT + "list-style") if root is not None else ():
                name = style.get(_STYLE + "name", "")
                for level in style:
                    depth = level.get(_TEXT + "level", "1")
                    if depth.isdigit():
                        numbered = level.tag == _TEXT + "list-level-style-number"
                        self.numbered[(name, int(depth) - 1)] = numbered
            for style in root.iter(_STYLE + "style") if root is not None else ():
                if style.get(_STYLE + "family") == "paragraph":
                    parents[style.get(_STYLE + "name", "")] = style.get(
                        _STYLE + "parent-style-name", ""
                    )
        self.preformatted = frozenset(
            name for name in parents if _derives_from(name, PREFORMATTED, parents)
        ) | {PREFORMATTED}


def _derives_from(name: str, ancestor: str, parents: dict[str, str]) -> bool:
    """Return whether style ``name`` is ``ancestor`` or inherits from it."""
    for _ in range(len(parents) + 1):  # a circle of parents ends the walk
        if name == ancestor:
            return True
        if not (name := parents.get(name, "")):
            return False
    return False


class _TextReader:
    """Writes text blocks (paragraphs, headings, lists, tables) into the builder."""

    def __init__(self, tables: TableWriter, styles: _Styles) -> None:
        self.tables = tables
        self.builder = tables.builder
        self.styles = styles
        self.stack: list[tuple[int, str]] = []
        self.first_heading = ""
        self.count = 0
        self.code: str | None = None  # in a run of code lines: "" or "blank" after a blank one

    def blocks(self, parent: Element) -> None:
        """Write the blocks under ``parent`` in order."""
        for child in parent:
            self.count += 1
            if self.count % BLOCKS_PER_CHECK == 0:
                self.tables.budget.check(f"at block {self.count}")
            if child.tag == _TEXT + "p" and self._is_code(child):
                self.code_line(child)
                continue
            if self.code is not None:  # the code ends
                self.builder.block_break()
                self.code = None
            if child.tag == _TEXT + "h":
                self.heading(child)
            elif child.tag == _TEXT + "p":
                self.paragraph(child)
            elif child.tag == _TEXT + "list":
                self.list(child, style=child.get(_TEXT + "style-name", ""), depth=0)
                self.builder.block_break()
            elif child.tag == _TABLE + "table":
                self.tables.write(_rows(child, self.tables), where="a table")
            elif child.tag not in _SKIPPED:  # sections, frames, text boxes: their blocks
                self.blocks(child)

    def heading(self, h: Element) -> None:
        text, after = _inline(h)
        if not text:
            return
        level = h.get(_TEXT + "outline-level", "1")
        heading = clip_title(text)
        depth = int(level) if level.isdigit() else 1
        # A document's title is its top heading, as Word's and Markdown's: a file opening at
        # a subheading ("## Lifespan State") is titled by its name, not by that section.
        self.first_heading = self.first_heading or (heading if depth <= 1 else "")
        path = nest_heading(self.stack, depth, heading)
        self.builder.open_section(heading_path=path)
        self.builder.write_lines(heading)
        self.builder.block_break()
        self._after(after)

    def paragraph(self, p: Element) -> None:
        text, after = _inline(p)
        if text:
            self.builder.block_break()
            self.builder.write(text)
            self.builder.block_break()
        self._after(after)

    def code_line(self, p: Element) -> None:
        """Write a line of code: spaces kept, on the line after the code line before it
        (pandoc and office suites write code as one paragraph a line)."""
        text = _verbatim(p).rstrip()
        if not text:
            self.code = "blank" if self.code is not None else None
            return
        if self.code == "":
            self.builder.line_break()
        else:
            self.builder.block_break()
        self.builder.write_lines(text)
        self.code = ""

    def _is_code(self, p: Element) -> bool:
        return p.get(_TEXT + "style-name", "") in self.styles.preformatted

    def list(self, element: Element, *, style: str, depth: int) -> None:
        """Write a list's items, each on its line with its marker, nested lists indented."""
        style = element.get(_TEXT + "style-name", "") or style
        numbered = self.styles.numbered.get((style, min(depth, 9)), False)
        for number, item in enumerate(element.findall(_TEXT + "list-item"), start=1):
            for child in item:
                if child.tag == _TEXT + "list":
                    self.list(child, style=style, depth=depth + 1)
                elif child.tag in (_TEXT + "p", _TEXT + "h"):
                    text, after = _inline(child)
                    if text:
                        marker = f"{number}." if numbered else "-"
                        self.builder.line_break()
                        self.builder.write_lines(f"{'  ' * depth}{marker} {text}")
                    self._after(after, block=False)

    def _after(self, lines: list[str], *, block: bool = True) -> None:
        for line in lines:
            self.builder.line_break()
            self.builder.write(line)
        if lines and block:
            self.builder.block_break()


def _inline(element: Element) -> tuple[str, list[str]]:
    """Return a paragraph's text on one line, and its notes and comments as lines."""
    pieces: list[str] = []
    after: list[str] = []
    _collect(element, pieces, after)
    return " ".join("".join(pieces).split()), after


def _collect(element: Element, pieces: list[str], after: list[str]) -> None:
    pieces.append(element.text or "")
    for child in element:
        if child.tag == _TEXT + "note":
            citation = " ".join(child.findtext(_TEXT + "note-citation", "").split())
            pieces.append(f"[{citation}]")
            body = child.find(_TEXT + "note-body")
            if body is not None and (text := _text(body)):
                after.append(f"[{citation}] {text}")
        elif child.tag == _OFFICE + "annotation":
            author = " ".join(child.findtext(_DC + "creator", "").split())
            text = " ".join(filter(None, (_inline(p)[0] for p in child.iter(_TEXT + "p"))))
            if text:
                after.append(f"Comment ({author}): {text}" if author else f"Comment: {text}")
        elif child.tag in (_TEXT + "s", _TEXT + "tab", _TEXT + "line-break"):
            pieces.append(" ")
        elif child.tag != _OFFICE + "annotation-end":
            _collect(child, pieces, after)
        pieces.append(child.tail or "")


def _verbatim(element: Element) -> str:
    """Return a paragraph's text with its runs of spaces, tabs and line breaks as written."""
    pieces = [element.text or ""]
    for child in element:
        if child.tag == _TEXT + "s":
            count = child.get(_TEXT + "c", "1")
            pieces.append(" " * min(int(count) if count.isdigit() else 1, MAX_SPACES))
        elif child.tag == _TEXT + "tab":
            pieces.append("\t")
        elif child.tag == _TEXT + "line-break":
            pieces.append("\n")
        elif child.tag not in (_TEXT + "note", _OFFICE + "annotation"):
            pieces.append(_verbatim(child))
        pieces.append(child.tail or "")
    return "".join(pieces)


def _text(element: Element) -> str:
    """Return the paragraphs under ``element`` on one line."""
    return " ".join(
        filter(None, (_inline(p)[0] for p in element.iter() if p.tag in (_TEXT + "p", _TEXT + "h")))
    )


def _class(frame: Element) -> str:
    return frame.get(_PRESENTATION + "class", "")


def _repeat(element: Element, attribute: str) -> int:
    value = element.get(_TABLE + attribute, "1")
    return int(value) if value.isdigit() else 1


def _rows(table: Element, tables: TableWriter) -> Iterator[list[str]]:
    """Yield a table's rows, repeats expanded; empty rows only when a row with a value
    follows them (trailing ones are the sheet's unused rest)."""
    empty = 0
    for row in _row_elements(table):
        cells = _cells(row, tables)
        repeat = _repeat(row, "number-rows-repeated")
        if not cells:
            empty += repeat
            continue
        for _ in range(empty):  # bounded: the writer refuses past MAX_TABLE_CELLS
            yield []
        empty = 0
        for _ in range(repeat):
            yield cells


def _row_elements(parent: Element) -> Iterator[Element]:
    for child in parent:
        if child.tag == _TABLE + "table-row":
            yield child
        elif child.tag in _ROW_GROUPS:
            yield from _row_elements(child)


def _cells(row: Element, tables: TableWriter) -> list[str]:
    """Return a row's cell texts, repeats expanded, trailing empty cells left out."""
    cells: list[str] = []
    empty = 0
    for cell in row:
        if cell.tag not in (_TABLE + "table-cell", _TABLE + "covered-table-cell"):
            continue
        text = _text(cell)
        repeat = _repeat(cell, "number-columns-repeated")
        if not text:
            empty += repeat
            continue
        if len(cells) + empty + repeat > tables.max_cells:
            raise tables.too_many(f"a row has more than {tables.max_cells} cells")
        cells.extend([""] * empty + [text] * repeat)
        empty = 0
    return cells
