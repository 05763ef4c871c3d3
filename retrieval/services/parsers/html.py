"""HTML files: visible text in reading order, one section per heading."""

from __future__ import annotations

from typing import ClassVar

from bs4 import BeautifulSoup
from bs4.dammit import EncodingDetector, UnicodeDammit
from bs4.element import NavigableString, PreformattedString, Script, Stylesheet, Tag
from bs4.exceptions import ParserRejectedMarkup

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.layout import (
    TextBuilder,
    clip_title,
    file_label,
    nest_heading,
    stem_title,
)
from retrieval.services.types import ParsedDocument

HIDDEN = frozenset(
    {"script", "style", "noscript", "template", "svg", "head", "title", "iframe", "object"}
)
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
# Elements set off by a blank line, and elements that only start a new line.
BLOCKS = frozenset(
    {
        "p", "pre", "blockquote", "ul", "ol", "dl", "table", "section", "article", "header",
        "footer", "main", "nav", "aside", "figure", "form", "fieldset", "address", "details",
        "hr", "body", "html",
    }
)  # fmt: skip
LINES = frozenset(
    {
        "div", "li", "tr", "dt", "dd", "br", "caption", "figcaption", "summary", "legend",
        "option", "thead", "tbody", "tfoot",
    }
)  # fmt: skip
CELLS = frozenset({"td", "th"})
# Declarations a browser overrides (WHATWG encoding standard): these labels mean cp1252,
# and a UTF-16 declaration in bytes already read as ASCII is wrong.
_DECLARED_ALIASES = dict.fromkeys(("iso-8859-1", "latin-1", "ascii", "us-ascii"), "windows-1252")
_IGNORED_DECLARATIONS = ("utf-16", "utf-32")


class HtmlParser(BaseParser):
    """Read HTML with BeautifulSoup's stdlib backend, dropping scripts, styles and markup."""

    mime_types: ClassVar[tuple[str, ...]] = ("text/html", "application/xhtml+xml")
    extensions: ClassVar[tuple[str, ...]] = (".html", ".htm", ".xhtml")

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the visible text, one section per heading, titled by ``<title>`` or h1."""
        markup, encoding = _decode(data)
        try:
            soup = BeautifulSoup(markup, "html.parser")
        except ParserRejectedMarkup as e:  # e.g. "<![" then a NUL: the stdlib parser asserts
            raise ParseError(f"Cannot parse {file_label(filename)}: malformed markup ({e}).") from e
        builder = TextBuilder()
        builder.open_section()
        first_h1 = _write_visible_text(soup, builder)
        text, sections = builder.build()
        if not text:
            raise ParseError(f"Cannot parse {file_label(filename)}: it has no visible text.")
        title = _title_tag(soup) or first_h1 or stem_title(filename)
        return ParsedDocument(
            text=text, title=title, sections=sections, metadata={"encoding": encoding}
        )


def _decode(data: bytes) -> tuple[str, str]:
    """Return ``data`` decoded by its BOM, else its declared charset, else UTF-8."""
    declared = EncodingDetector.find_declared_encoding(data, is_html=True)
    declared = _DECLARED_ALIASES.get(declared or "", declared)
    encodings = ["utf-8"]
    if declared and not declared.startswith(_IGNORED_DECLARATIONS):
        encodings.insert(0, declared)
    dammit = UnicodeDammit(data, user_encodings=encodings, is_html=True)
    return dammit.unicode_markup or "", dammit.original_encoding or "utf-8"


def _write_visible_text(soup: BeautifulSoup, builder: TextBuilder) -> str:
    """Write the visible text of ``soup`` to ``builder``; return the first h1's text."""
    stack: list[tuple[Tag | NavigableString, bool]] = [(soup, False)]
    headings: list[tuple[int, str]] = []
    first_h1 = ""
    while stack:  # an explicit stack, so deeply nested pages cannot exhaust recursion
        node, leaving = stack.pop()
        if isinstance(node, NavigableString):
            if not isinstance(node, PreformattedString | Script | Stylesheet):
                builder.write(node)
            continue
        name = node.name
        if leaving:
            _break_around(name, builder)
            if name == "dd":
                builder.join_blocks(False)
        elif name in HIDDEN or _is_table_of_contents(node):
            continue
        elif name in HEADINGS and (heading := clip_title(node.get_text())):
            first_h1 = first_h1 or (heading if name == "h1" else "")
            builder.block_break()
            builder.open_section(heading_path=nest_heading(headings, int(name[1]), heading))
            builder.write(node.get_text())
            builder.block_break()
        elif name == "pre":
            builder.block_break()
            builder.write_lines(node.get_text())
            builder.block_break()
        else:
            _break_around(name, builder)
            if name in CELLS:
                builder.separate(" | ")
            elif name == "dd" and _follows_term(node):
                builder.join_blocks(True)
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.contents))
    return first_h1


def _break_around(name: str, builder: TextBuilder) -> None:
    if name in BLOCKS:
        builder.block_break()
    elif name in LINES:
        builder.line_break()


def _is_table_of_contents(node: Tag) -> bool:
    """Return whether ``node`` is a table of contents: ``role="doc-toc"`` (Pandoc,
    docutils), ``aria-label="Table of contents"`` (MkDocs Material), or ``toc`` as its id
    or one of its classes (DocBook, AsciiDoc, Wikipedia).

    A table of contents repeats the headings that already open their sections; as text it
    made chunks of bare titles that matched questions without answering them, and a
    manual's "opening sentence".
    """
    if node.get("role") == "doc-toc" or str(node.get("id", "")).lower() == "toc":
        return True
    if str(node.get("aria-label", "")).lower() == "table of contents":
        return True
    classes = node.get("class") or ()
    return any(c.lower() == "toc" for c in classes)


def _follows_term(node: Tag) -> bool:
    """Return whether ``node`` comes right after a ``<dt>`` with text: the definition of a term."""
    previous = node.find_previous_sibling(True)
    return previous is not None and previous.name == "dt" and bool(previous.get_text(strip=True))


def _title_tag(soup: BeautifulSoup) -> str:
    """Return the document's ``<title>``, skipping titles inside inline SVG."""
    for title in soup.find_all("title"):
        if title.find_parent("svg") is None and (text := clip_title(title.get_text())):
            return text
    return ""
