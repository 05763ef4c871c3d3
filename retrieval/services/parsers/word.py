"""Word documents (``.docx``), read from their XML parts through ``defusedxml``.

Paragraph styles make the structure: ``Title`` and ``Heading 1``…``Heading 9`` (or any
style with an outline level) open sections whose heading path is the headings above
them; list paragraphs keep their markers (``-`` for bullets, ``1.`` for numbers) and
their nesting; tables become rows of ``column: value`` lines (:mod:`.tables`); a
footnote, endnote or comment is written after the paragraph that refers to it.

The parts are read directly rather than through python-docx or mammoth: python-docx
parses every part of the package with lxml on opening (no ``defusedxml``) and does not
read footnotes; mammoth converts to HTML that would be parsed a second time. Reading
``document.xml``, ``styles.xml``, ``numbering.xml`` and the notes ourselves keeps every
part under the archive limits and ``defusedxml``, and needs nothing but the ``office``
extra.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar
from xml.etree.ElementTree import Element

from retrieval.exceptions import ParseError
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import (
    TextBuilder,
    clip_title,
    nest_heading,
    stem_title,
)
from retrieval.services.parsers.packages import Package, PackageParser
from retrieval.services.parsers.tables import TableWriter
from retrieval.services.types import ParsedDocument

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
DOCUMENT = "word/document.xml"
#: Blocks read between checks of ``MAX_PARSE_SECONDS``.
BLOCKS_PER_CHECK = 500
#: How many ``basedOn`` links are followed to find a style's heading level or list.
STYLE_DEPTH = 10
_HEADING_NAME = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)
_RUN_TEXT = {_W + "t": None, _W + "tab": " ", _W + "br": " ", _W + "cr": " "}


class DocxParser(PackageParser):
    """Read a Word document: headings as sections, lists, tables, notes and comments."""

    mime_types: ClassVar[tuple[str, ...]] = (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )
    extensions: ClassVar[tuple[str, ...]] = (".docx",)

    def read(self, data: bytes, *, label: str, filename: str | None) -> ParsedDocument:
        """Return the document's text, a section per heading."""
        budget = ParseBudget(label)
        kind = "a Word document"
        with Package(data, label=label, kind=kind, parts=(DOCUMENT,), budget=budget) as package:
            reader = _DocumentReader(package, budget)
            body = _required(package.xml(DOCUMENT), _W + "body", label)
            reader.read_blocks(body)
            core = package.xml("docProps/core.xml")
        text, sections = reader.builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: it has no text.")
        declared = core.findtext(_DC_TITLE, "") if core is not None else ""
        return ParsedDocument(
            text=text,
            title=reader.title or clip_title(declared) or stem_title(filename),
            sections=sections,
            metadata={"format": "docx"},
        )


def _required(root: Element | None, tag: str, label: str) -> Element:
    found = root.find(tag) if root is not None else None
    if found is None:
        raise ParseError(f"Cannot parse {label}: it is not a Word document (it has no body).")
    return found


class _DocumentReader:
    """Writes a document's blocks into a builder, tracking headings, lists and notes."""

    def __init__(self, package: Package, budget: ParseBudget) -> None:
        self.builder = TextBuilder()
        self.budget = budget
        self.tables = TableWriter(package.label, budget, self.builder)
        self.styles = _Styles(package.xml("word/styles.xml"))
        self.numbering = _Numbering(package.xml("word/numbering.xml"))
        self.notes = {
            "footnote": _notes(package.xml("word/footnotes.xml"), _W + "footnote"),
            "endnote": _notes(package.xml("word/endnotes.xml"), _W + "endnote"),
        }
        self.comments = _comments(package.xml("word/comments.xml"))
        self.stack: list[tuple[int, str]] = []
        self.counters: dict[tuple[str, int], int] = {}
        self.note_numbers = 0
        self.title = ""
        self.last_list: str | None = None
        self.blocks = 0
        self.builder.open_section()

    def read_blocks(self, parent: Element) -> None:
        """Write the paragraphs and tables under ``parent``, content controls included."""
        for child in parent:
            self.blocks += 1
            if self.blocks % BLOCKS_PER_CHECK == 0:
                self.budget.check(f"at block {self.blocks}")
            if child.tag == _W + "p":
                self.paragraph(child)
            elif child.tag == _W + "tbl":
                self.tables.write(_rows(child), where=f"table at block {self.blocks}")
            elif child.tag in (_W + "sdt", _W + "sdtContent", _W + "customXml"):
                self.read_blocks(child)

    def paragraph(self, p: Element) -> None:
        """Write a paragraph as a heading, a list item or a block, then its notes."""
        text, after = self._inline(p)
        style = _style_id(p)
        level = self.styles.heading_level(style)
        if level is not None and text:
            heading = clip_title(text)
            self.title = self.title or (heading if level <= 1 else "")
            self.builder.open_section(heading_path=nest_heading(self.stack, level, heading))
            self.builder.write_lines(heading)
            self.builder.block_break()
        elif (item := self._list_item(p, style)) is not None and text:
            depth, marker, num_id = item
            if num_id != self.last_list and not depth:  # another list: a block of its own
                self.builder.block_break()
            self.last_list = num_id
            self.builder.line_break()
            self.builder.write_lines(f"{'  ' * depth}{marker} {' '.join(text.split())}")
        elif text:
            self.last_list = None
            self.builder.block_break()
            self.builder.write(text)
            self.builder.block_break()
        for line in after:
            self.builder.line_break()
            self.builder.write(line)
        if after:
            self.builder.block_break()

    def _inline(self, p: Element) -> tuple[str, list[str]]:
        """Return a paragraph's text and the notes and comments it refers to, as lines."""
        pieces: list[str] = []
        after: list[str] = []
        for node in _walk(p):
            tag = node.tag
            if tag in _RUN_TEXT:
                pieces.append(node.text or "" if _RUN_TEXT[tag] is None else _RUN_TEXT[tag])
            elif tag in (_W + "footnoteReference", _W + "endnoteReference"):
                kind = "footnote" if tag == _W + "footnoteReference" else "endnote"
                note = self.notes[kind].get(node.get(_W + "id", ""), "")
                self.note_numbers += 1
                pieces.append(f"[{self.note_numbers}]")
                if note:
                    after.append(f"[{self.note_numbers}] {note}")
            elif tag == _W + "commentReference":
                if comment := self.comments.get(node.get(_W + "id", "")):
                    after.append(comment)
        return "".join(pieces).strip(), after

    def _list_item(self, p: Element, style: str) -> tuple[int, str, str] | None:
        """Return a list paragraph's depth, marker and list, else ``None``."""
        num_id, depth = _numbering_of(p)
        if num_id is None:
            num_id, depth = self.styles.numbering(style)
        if num_id is None or num_id == "0":  # numId 0 switches a style's list off
            return None
        if not self.numbering.is_numbered(num_id, depth):
            return depth, "-", num_id
        for key in [key for key in self.counters if key[0] == num_id and key[1] > depth]:
            del self.counters[key]  # a deeper list starts again under each item
        number = self.counters.get((num_id, depth), 0) + 1
        self.counters[(num_id, depth)] = number
        return depth, f"{number}.", num_id


def _walk(element: Element) -> Iterator[Element]:
    """Yield ``element``'s descendants in order, leaving out the fallback copies of
    drawings (a text box is stored twice: as a drawing and as its fallback)."""
    for child in element:
        if child.tag == _MC_FALLBACK:
            continue
        yield child
        yield from _walk(child)


def _text(element: Element) -> str:
    """Return the text under ``element`` on one line."""
    return " ".join(
        "".join(node.text or "" for node in _walk(element) if node.tag == _W + "t").split()
    )


def _paragraphs(element: Element) -> str:
    """Return the paragraphs under ``element``, each's text, joined by spaces."""
    return " ".join(filter(None, (_text(p) for p in element.iter(_W + "p"))))


def _rows(table: Element) -> Iterator[list[str]]:
    for row in table.findall(_W + "tr"):  # a nested table is in its cell's text
        yield [_paragraphs(cell) for cell in row.findall(_W + "tc")]


def _notes(root: Element | None, tag: str) -> dict[str, str]:
    """Return footnotes or endnotes by id, their separators left out."""
    if root is None:
        return {}
    return {
        note.get(_W + "id", ""): _paragraphs(note)
        for note in root.findall(tag)
        if note.get(_W + "type") in (None, "normal")
    }


def _comments(root: Element | None) -> dict[str, str]:
    """Return each comment as a line naming its author, by id."""
    if root is None:
        return {}
    comments = {}
    for comment in root.findall(_W + "comment"):
        author = comment.get(_W + "author", "").strip()
        text = _paragraphs(comment)
        if text:
            comments[comment.get(_W + "id", "")] = (
                f"Comment ({author}): {text}" if author else f"Comment: {text}"
            )
    return comments


def _style_id(p: Element) -> str:
    style = p.find(f"{_W}pPr/{_W}pStyle")
    return style.get(_W + "val", "") if style is not None else ""


def _numbering_of(element: Element) -> tuple[str | None, int]:
    """Return the list (``numId``) and level a paragraph or style sets, if it sets one."""
    num = element.find(f"{_W}pPr/{_W}numPr")
    if num is None:
        return None, 0
    num_id = num.find(_W + "numId")
    level = num.find(_W + "ilvl")
    depth = level.get(_W + "val", "0") if level is not None else "0"
    return (
        num_id.get(_W + "val") if num_id is not None else None,
        min(int(depth), 8) if depth.isdigit() else 0,
    )


class _Styles:
    """Paragraph styles by id: their heading level and list, through ``basedOn``."""

    def __init__(self, root: Element | None) -> None:
        self.styles: dict[str, Element] = {}
        for style in root.findall(_W + "style") if root is not None else ():
            if style.get(_W + "type") == "paragraph":
                self.styles[style.get(_W + "styleId", "")] = style

    def heading_level(self, style_id: str) -> int | None:
        """Return 0 for a title, 1–9 for a heading, ``None`` for any other style."""
        for style in self._chain(style_id):
            name = style.find(_W + "name")
            name_text = (name.get(_W + "val", "") if name is not None else "").strip()
            if name_text.lower() == "title":
                return 0
            if match := _HEADING_NAME.match(name_text):
                return int(match.group(1))
            outline = style.find(f"{_W}pPr/{_W}outlineLvl")
            value = outline.get(_W + "val", "") if outline is not None else ""
            if value.isdigit() and int(value) < 9:
                return int(value) + 1
        # A style missing from styles.xml: Word's own ids say what it is.
        if match := _HEADING_NAME.match(style_id.replace("Heading", "heading ")):
            return int(match.group(1))
        return 0 if style_id == "Title" else None

    def numbering(self, style_id: str) -> tuple[str | None, int]:
        """Return the list a style puts its paragraphs in, if any."""
        for style in self._chain(style_id):
            num_id, depth = _numbering_of(style)
            if num_id is not None:
                return num_id, depth
        return None, 0

    def _chain(self, style_id: str) -> Iterator[Element]:
        for _ in range(STYLE_DEPTH):
            style = self.styles.get(style_id)
            if style is None:
                return
            yield style
            based = style.find(_W + "basedOn")
            style_id = based.get(_W + "val", "") if based is not None else ""


class _Numbering:
    """List definitions: whether a list level is numbered or bulleted."""

    def __init__(self, root: Element | None) -> None:
        self.abstract: dict[str, str] = {}  # numId -> abstractNumId
        self.formats: dict[tuple[str, str], str] = {}  # (abstractNumId, ilvl) -> numFmt
        for num in root.findall(_W + "num") if root is not None else ():
            abstract = num.find(_W + "abstractNumId")
            if abstract is not None:
                self.abstract[num.get(_W + "numId", "")] = abstract.get(_W + "val", "")
        for abstract in root.findall(_W + "abstractNum") if root is not None else ():
            abstract_id = abstract.get(_W + "abstractNumId", "")
            for level in abstract.findall(_W + "lvl"):
                fmt = level.find(_W + "numFmt")
                if fmt is not None:
                    self.formats[(abstract_id, level.get(_W + "ilvl", "0"))] = fmt.get(
                        _W + "val", ""
                    )

    def is_numbered(self, num_id: str, depth: int) -> bool:
        """Return whether level ``depth`` of list ``num_id`` counts (1., a., i.)."""
        fmt = self.formats.get((self.abstract.get(num_id, ""), str(depth)), "bullet")
        return fmt not in ("bullet", "none", "")
