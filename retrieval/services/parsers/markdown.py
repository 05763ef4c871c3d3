"""Markdown files: plain text with the formatting stripped, one section per heading."""

from __future__ import annotations

import html
import re
from functools import cache
from typing import ClassVar

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

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


@cache
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


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
    if kind in ("paragraph", "heading"):
        return _inline_text(node)
    if kind in ("fence", "code_block"):
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
