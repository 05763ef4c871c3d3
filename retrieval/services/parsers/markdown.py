"""Markdown files: plain text with the formatting stripped, one section per heading.

Documentation written for MkDocs is read as MkDocs renders it: an admonition
(``!!! note "Title"``, ``??? abstract``; mdit-py-plugins' ``admon``) gives its title and
its indented body as text, and a mkdocstrings directive (``::: package.module.Class``
with its indented YAML options) gives the object's name alone: neither the markers nor
the options are words of the document (left in, they were the "opening sentence" of
every chunk's header in three of Starlette's 25 pages).
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import ClassVar

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.tree import SyntaxTreeNode
from mdit_py_plugins.admon import admon_plugin

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.layout import (
    TextBuilder,
    clip_title,
    decode_text,
    file_label,
    nest_heading,
    stem_title,
)
from retrieval.services.types import ParsedDocument

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(.*?)[ \t]*$", re.M)
_HTML_HIDDEN = re.compile(r"<!--.*?-->|<(script|style)\b.*?</\1\s*>", re.S | re.I)
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_WHITESPACE = re.compile(r"\s+")
# A mkdocstrings directive: ``::: dotted.name`` alone on its line.
_AUTODOC = re.compile(r":::[ \t]+([\w.:-]+)[ \t]*")


@cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(admon_plugin)
    md.block.ruler.before("paragraph", "autodoc", _autodoc_block)
    return md


def _autodoc_block(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """A mkdocstrings directive and its more indented option lines: one ``autodoc``
    token holding the object's dotted name."""
    if state.sCount[start_line] - state.blkIndent >= 4:
        return False  # an indented code block's line
    start = state.bMarks[start_line] + state.tShift[start_line]
    match = _AUTODOC.fullmatch(state.src, start, state.eMarks[start_line])
    if match is None:
        return False
    if silent:
        return True
    line = start_line + 1
    while (
        line < end_line
        and not state.isEmpty(line)
        and state.sCount[line] > state.sCount[start_line]
    ):
        line += 1
    token = state.push("autodoc", "", 0)
    token.content = match.group(1)
    token.map = [start_line, line]
    state.line = line
    return True


class MarkdownParser(BaseParser):
    """Read CommonMark (with tables): headings, lists and code become plain lines."""

    mime_types: ClassVar[tuple[str, ...]] = ("text/markdown", "text/x-markdown")
    extensions: ClassVar[tuple[str, ...]] = (".md", ".markdown")

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the text, one section per heading region, titled by the first H1."""
        source, _ = decode_text(data, filename=filename)
        body, front_title = _split_front_matter(source)
        builder = TextBuilder()
        builder.open_section()
        stack: list[tuple[int, str]] = []
        first_h1 = ""
        for node in SyntaxTreeNode(_markdown().parse(body)).children:
            builder.block_break()
            if node.type == "heading" and (heading := _one_line(_inline_text(node))):
                level = int(node.tag[1])
                first_h1 = first_h1 or (heading if level == 1 else "")
                path = nest_heading(stack, level, clip_title(heading))
                builder.open_section(heading_path=path)
                builder.write_lines(heading)
            else:
                builder.write_lines(_block_text(node))
        text, sections = builder.build()
        if not text:
            raise ParseError(f"Cannot parse {file_label(filename)}: it has no text.")
        title = clip_title(first_h1) or front_title or stem_title(filename)
        return ParsedDocument(text=text, title=title, sections=sections)


def _split_front_matter(source: str) -> tuple[str, str]:
    """Return the body without its YAML front matter, and the front matter's title."""
    match = _FRONT_MATTER.match(source)
    if not match:
        return source, ""
    title = ""
    if title_match := _FRONT_MATTER_TITLE.search(match.group(1)):
        value = title_match.group(1)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if not value.startswith(("|", ">")):  # a YAML block scalar: too rare to read
            title = clip_title(value)
    return source[match.end() :], title


def _block_text(node: SyntaxTreeNode) -> str:
    """Return a block as plain lines, blocks inside it separated by blank lines."""
    kind = node.type
    if kind in ("paragraph", "heading", "admonition_title"):
        return _inline_text(node)
    if kind in ("fence", "code_block", "autodoc"):
        return node.content
    if kind in ("bullet_list", "ordered_list"):
        return "\n".join(_list_lines(node))
    if kind == "table":
        return "\n".join(_table_rows(node))
    if kind == "html_block":
        text = html.unescape(_HTML_TAG.sub("", _HTML_HIDDEN.sub("", node.content)))
        return "\n".join(line.strip() for line in text.split("\n"))
    if kind == "hr":
        return ""
    return "\n\n".join(_block_text(child) for child in node.children)


def _list_lines(node: SyntaxTreeNode) -> list[str]:
    """Return one line per list item; ordered lists keep their numbers."""
    start = int(node.attrs.get("start", 1)) if node.type == "ordered_list" else None
    lines = []
    for index, item in enumerate(node.children):
        item_text = "\n".join(filter(None, (_block_text(child) for child in item.children)))
        if start is not None:
            item_text = f"{start + index}. {item_text}"
        lines.append(item_text)
    return lines


def _table_rows(node: SyntaxTreeNode) -> list[str]:
    """Return one line per table row, cells separated by `` | ``."""
    rows = []
    for part in node.children:  # thead, tbody
        for row in part.children:
            rows.append(" | ".join(_one_line(_inline_text(cell)) for cell in row.children))
    return rows


def _inline_text(node: SyntaxTreeNode) -> str:
    """Return the text inside ``node`` without markup: link text, image alt text, code."""
    parts = []
    for child in node.children:
        kind = child.type
        if kind in ("text", "code_inline"):
            parts.append(child.content)
        elif kind == "softbreak":
            parts.append(" ")
        elif kind == "hardbreak":
            parts.append("\n")
        elif kind != "html_inline":
            parts.append(_inline_text(child))
    return "".join(parts)


def _one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()
