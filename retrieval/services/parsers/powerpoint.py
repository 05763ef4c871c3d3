"""PowerPoint presentations (``.pptx``), read from their XML parts through ``defusedxml``.

Each slide is a section whose heading is its title (else "Slide N") and whose page is
its number: its text frames in order (the items of a body placeholder as ``-`` list
lines, indented by level), its tables as rows of ``column: value`` lines, then its
speaker notes after "Notes:".

The parts are read directly rather than through python-pptx, which parses every part
of the package with lxml on opening: here the slide list is counted against
``MAX_SLIDES`` before any slide is read, and each slide is parsed by ``defusedxml``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar
from xml.etree.ElementTree import Element

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import TextBuilder, clip_title, stem_title
from retrieval.services.parsers.packages import R_ID, Package, PackageParser
from retrieval.services.parsers.tables import TableWriter
from retrieval.services.types import ParsedDocument

_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
PRESENTATION = "ppt/presentation.xml"
_TITLES = ("title", "ctrTitle")
#: Placeholders whose text is the slide master's furniture, not the slide's content.
_FURNITURE = ("dt", "ftr", "sldNum", "hdr")


class PptxParser(PackageParser):
    """Read a PowerPoint presentation: a section per slide, titled, with its notes."""

    mime_types: ClassVar[tuple[str, ...]] = (
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    )
    extensions: ClassVar[tuple[str, ...]] = (".pptx",)

    def read(self, data: bytes, *, label: str, filename: str | None) -> ParsedDocument:
        """Return the slides' text, a section per slide."""
        budget = ParseBudget(label)
        builder = TextBuilder()
        tables = TableWriter(label, budget, builder)
        kind = "a PowerPoint presentation"
        with Package(data, label=label, kind=kind, parts=(PRESENTATION,), budget=budget) as package:
            slides = slide_parts(package)
            first_title = ""
            for number, part in enumerate(slides, start=1):
                budget.check(f"before slide {number}")
                title = _write_slide(package, part, number, tables)
                first_title = first_title or title
            core = package.xml("docProps/core.xml")
        text, sections = builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: its slides have no text.")
        declared = core.findtext(_DC_TITLE, "") if core is not None else ""
        return ParsedDocument(
            text=text,
            title=clip_title(declared) or first_title or stem_title(filename),
            sections=sections,
            metadata={"format": "pptx", "slides": len(slides)},
        )


def slide_parts(package: Package) -> list[str]:
    """Return the slides' part names in show order, refusing more than ``MAX_SLIDES``."""
    root = package.xml(PRESENTATION)
    listed = root.findall(f"{_P}sldIdLst/{_P}sldId") if root is not None else []
    check_slide_count(len(listed), package.label)
    targets = package.related(PRESENTATION, "slide")
    return [targets[ref] for slide in listed if (ref := slide.get(R_ID, "")) in targets]


def check_slide_count(count: int, label: str) -> None:
    """Refuse a presentation of more than ``MAX_SLIDES`` slides."""
    max_slides = int(retrieval_settings.MAX_SLIDES)
    if count > max_slides:
        raise ParseError(
            f"Cannot parse {label}: it has {count} slides; the limit is {max_slides} "
            "(MAX_SLIDES). Split it into smaller files."
        )


def _write_slide(package: Package, part: str, number: int, tables: TableWriter) -> str:
    """Write one slide as a section; return its title."""
    slide = package.xml(part)
    tree = slide.find(f"{_P}cSld/{_P}spTree") if slide is not None else None
    shapes = list(_shapes(tree)) if tree is not None else []
    title = next((clip_title(_frame_text(sp)) for sp in shapes if _placeholder(sp) in _TITLES), "")
    builder = tables.builder
    builder.open_section(heading_path=(title or f"Slide {number}",), page=number)
    if title:
        builder.write_lines(title)
        builder.block_break()
    for shape in shapes:
        kind = _placeholder(shape)
        if kind in _TITLES or kind in _FURNITURE:
            continue
        if (table := shape.find(f".//{_A}tbl")) is not None:
            tables.write(_rows(table), where=f"the table on slide {number}")
        elif (body := shape.find(f"{_P}txBody")) is not None:
            _write_frame(builder, body, bulleted=kind not in (None, "subTitle"))
    notes = [
        _frame_text(sp)
        for notes_part in package.related(part, "notesSlide").values()
        if (root := package.xml(notes_part)) is not None
        for sp in _shapes(root.find(f"{_P}cSld/{_P}spTree"))
        if _placeholder(sp) == "body"
    ]
    if text := " ".join(filter(None, notes)):
        builder.block_break()
        builder.write(f"Notes: {text}")
    builder.block_break()
    return title


def _shapes(tree: Element | None) -> Iterator[Element]:
    """Yield the shapes and tables of a shape tree in order, groups opened."""
    for shape in tree if tree is not None else ():
        if shape.tag == _P + "grpSp":
            yield from _shapes(shape)
        elif shape.tag in (_P + "sp", _P + "graphicFrame"):
            yield shape


def _placeholder(shape: Element) -> str | None:
    """Return a placeholder's type ("title", "body" …), ``None`` for a free shape."""
    for ph in shape.iter(_P + "ph"):
        return ph.get("type", "body")  # a placeholder with no type is a content one
    return None


def _paragraph_text(paragraph: Element) -> str:
    return " ".join(
        "".join(
            node.text or "" if node.tag == _A + "t" else " "
            for node in paragraph.iter()
            if node.tag in (_A + "t", _A + "br")
        ).split()
    )


def _frame_text(shape: Element) -> str:
    return " ".join(filter(None, (_paragraph_text(p) for p in shape.iter(_A + "p"))))


def _write_frame(builder: TextBuilder, body: Element, *, bulleted: bool) -> None:
    """Write a text frame's paragraphs, each on its line; a body's as list items."""
    builder.block_break()
    for paragraph in body.findall(_A + "p"):
        text = _paragraph_text(paragraph)
        if not text:
            continue
        properties = paragraph.find(_A + "pPr")
        level = properties.get("lvl", "0") if properties is not None else "0"
        depth = min(int(level), 8) if level.isdigit() else 0
        explicit = properties is not None and (
            properties.find(_A + "buChar") is not None
            or properties.find(_A + "buAutoNum") is not None
        )
        no_bullet = properties is not None and properties.find(_A + "buNone") is not None
        builder.line_break()
        if (bulleted or explicit) and not no_bullet:
            builder.write_lines(f"{'  ' * depth}- {text}")
        else:
            builder.write_lines(text)
    builder.block_break()


def _rows(table: Element) -> Iterator[list[str]]:
    for row in table.iter(_A + "tr"):
        yield [_frame_text(cell) for cell in row.findall(_A + "tc")]
