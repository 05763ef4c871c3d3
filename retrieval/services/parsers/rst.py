"""reStructuredText: section titles from their adornments, markup reduced to plain text.

A small reader of what retrieval needs, not a docutils replacement: titles (underlined,
or over- and underlined) nest by the order their adornment styles first appear, as
in docutils; directives keep their content (code, notes) except those that only
point elsewhere (toctree, images, includes); comments and link targets are dropped;
inline roles, literals, emphasis and references keep their text. An autodoc directive
(``autoclass``, ``autofunction``...) gives its object's name and the text written under
it (methods described in the file, notes): only the docstrings it pulls in are elsewhere.
"""

from __future__ import annotations

import re
import textwrap
from typing import ClassVar

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

__all__ = ["RstParser", "looks_like_rst", "parse_rst"]

_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{2,}")  # one punctuation mark, 3 or more times
_DIRECTIVE = re.compile(r"\.\.\s+([\w:.+-]+)::(?:\s+(.*))?$")
_EXPLICIT = re.compile(r"\.\.(?:\s|$)")  # comments, targets, substitutions, footnotes
_BARE_FIELD = re.compile(r":[\w-]+:")
_OPTION = re.compile(r":[\w -]+:(?:\s|$)")
#: Directives whose content points elsewhere rather than saying something.
_DROPPED = frozenset(
    "toctree image figure include literalinclude raw highlight index meta contents "
    "sectnum only currentmodule module tabularcolumns csv-table".split()
)
#: Directives whose body is code, kept as it is.
_CODE = ("code-block", "code", "sourcecode", "doctest", "testcode", "testoutput", "literal")
_VERSIONS = {
    "versionadded": "Added in version {}.",
    "versionchanged": "Changed in version {}.",
    "deprecated": "Deprecated since version {}.",
    "versionremoved": "Removed in version {}.",
}
_INLINE = (
    (re.compile(r":[\w:.+-]+:`([^`<]*?)\s*<[^`>]*>`"), r"\1"),  # :ref:`text <target>`
    (re.compile(r":[\w:.+-]+:`~[^`]*?([^`.]*)`"), r"\1"),  # :func:`~module.name` -> name
    (re.compile(r":[\w:.+-]+:`!?([^`]*)`"), r"\1"),  # :class:`module.Name`
    (re.compile(r"``([^`]+)``"), r"\1"),  # ``literal``
    (re.compile(r"`([^`<]*?)\s*<[^`>]*>`_{1,2}"), r"\1"),  # `text <https://...>`_
    (re.compile(r"`([^`]+)`_{0,2}"), r"\1"),  # `reference`_, `interpreted`
    (re.compile(r"(?<!\w)([A-Za-z][\w-]*[A-Za-z0-9])__?(?=[\s.,;:!?)]|$)"), r"\1"),  # word_
    (re.compile(r"\*\*([^*]+)\*\*"), r"\1"),
    (re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])"), r"\1"),
)


class RstParser(BaseParser):
    """Read reStructuredText: one section per title, the markup reduced to its text."""

    mime_types: ClassVar[tuple[str, ...]] = ("text/x-rst", "text/prs.fallenstein.rst")
    extensions: ClassVar[tuple[str, ...]] = (".rst", ".rest")

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the text, one section per title, titled by the first title."""
        source, encoding = decode_text(data, filename=filename)
        parsed = parse_rst(source, filename=filename)
        return ParsedDocument(
            text=parsed.text,
            title=parsed.title,
            sections=parsed.sections,
            metadata={"encoding": encoding},
        )


def parse_rst(source: str, *, filename: str | None = None) -> ParsedDocument:
    """Parse reST ``source`` (already decoded)."""
    lines = source.expandtabs(8).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    builder = TextBuilder()
    builder.open_section()
    styles: list[tuple[str, bool]] = []
    stack: list[tuple[int, str]] = []
    first_title = ""
    block: list[str] = []

    def flush() -> None:
        if block:
            builder.write_lines(_inline("\n".join(textwrap.dedent("\n".join(block)).split("\n"))))
            block.clear()
        builder.block_break()

    i = 0
    while i < len(lines):
        title, style, used = _title_at(lines, i)
        if title:
            flush()
            if style not in styles:
                styles.append(style)
            heading = clip_title(_inline(title)) or clip_title(title)
            first_title = first_title or heading
            builder.open_section(heading_path=nest_heading(stack, styles.index(style), heading))
            builder.write_lines(heading)
            builder.block_break()
            i += used
            continue
        line = lines[i]
        stripped = line.strip()
        if not stripped or _is_transition(lines, i):
            flush()
            i += 1
            continue
        if _BARE_FIELD.fullmatch(stripped):  # file-wide flags such as ":orphan:"
            i += 1
            continue
        if _EXPLICIT.match(stripped):
            flush()
            i, parts = _explicit_block(lines, i)
            for part in parts:
                block.extend(part)
                flush()
            continue
        if stripped.endswith("::"):  # "Example::" introduces a literal block
            line = line.rstrip()[:-2].rstrip()
            line = line + ":" if line.strip() and not line.endswith(":") else line
        block.append(line)
        i += 1
    flush()
    text, sections = builder.build()
    if not text:
        raise ParseError(f"Cannot parse {file_label(filename)}: it has no text.")
    return ParsedDocument(text=text, title=first_title or stem_title(filename), sections=sections)


def looks_like_rst(text: str) -> bool:
    """Return whether plain text is reST with sections: two titles, or one and markup."""
    lines = text.replace("\r\n", "\n").split("\n")[:5000]
    titles = sum(bool(_title_at(lines, i)[0]) for i in range(len(lines)))
    if titles >= 2:
        return True
    markup = re.search(r"^\.\. [\w:-]+::|^\.\. _[^:]+:|:\w+:`|``\w", text, re.M)
    return titles == 1 and markup is not None


def _title_at(lines: list[str], i: int) -> tuple[str, tuple[str, bool], int]:
    """Return the title starting at line ``i``, its adornment style and lines used."""
    none = ("", ("", False), 0)
    if i > 0 and lines[i - 1].strip():
        return none  # a title follows a blank line (or starts the file)
    first = lines[i].rstrip()
    if _ADORNMENT.fullmatch(first) and i + 2 < len(lines):
        title, under = lines[i + 1].strip(), lines[i + 2].rstrip()
        if title and under == first and len(first) >= len(title):
            return title, (first[0], True), 3
        return none
    if not first or first[0].isspace() or i + 1 >= len(lines):
        return none
    under = lines[i + 1].rstrip()
    if _ADORNMENT.fullmatch(under) and len(under) >= len(first) and not _ADORNMENT.fullmatch(first):
        if i + 2 >= len(lines) or not lines[i + 2].strip():
            return first.strip(), (under[0], False), 2
    return none


def _is_transition(lines: list[str], i: int) -> bool:
    """A lone line of 4+ punctuation marks between blank lines: a horizontal rule."""
    line = lines[i].strip()
    before = i == 0 or not lines[i - 1].strip()
    after = i + 1 >= len(lines) or not lines[i + 1].strip()
    return len(line) >= 4 and bool(_ADORNMENT.fullmatch(line)) and before and after


def _explicit_block(lines: list[str], i: int) -> tuple[int, list[list[str]]]:
    """Read the explicit markup at line ``i``; return the next line and the text kept.

    A directive's body is read as reST in its turn (a ``versionchanged`` or a code
    block inside a ``confval`` leaves its text, not its markup); a code block's body
    is kept as it is.
    """
    indent = len(lines[i]) - len(lines[i].lstrip())
    directive = _DIRECTIVE.match(lines[i].strip())
    end = i + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
    ):
        end += 1
    if directive is None or directive.group(1).lower() in _DROPPED:
        return end, []  # a comment, target, substitution, footnote or a pointer elsewhere
    name, argument = directive.group(1).lower(), (directive.group(2) or "").strip()
    code = name.endswith(_CODE)
    parts = []
    if name in _VERSIONS:  # as Sphinx writes them: "Changed in version 2.0."
        parts.append([_VERSIONS[name].format(argument.split()[0] if argument else "")])
    elif argument and not code:
        parts.append([argument])  # e.g. an admonition's title, a confval's name
    body = i + 1
    while body < end and _OPTION.match(lines[body].strip()):
        body += 1  # the directive's options
    if code:
        return end, parts + _paragraphs(lines[body:end])
    return end, parts + _blocks(textwrap.dedent("\n".join(lines[body:end])).split("\n"))


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """Split lines at blank lines, keeping them as they are."""
    parts: list[list[str]] = []
    paragraph: list[str] = []
    for line in [*lines, ""]:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            parts.append(paragraph)
            paragraph = []
    return parts


def _blocks(lines: list[str]) -> list[list[str]]:
    """Read a directive's body: paragraphs, with nested explicit markup read in turn."""
    parts: list[list[str]] = []
    paragraph: list[str] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not stripped or _EXPLICIT.match(stripped) or _BARE_FIELD.fullmatch(stripped):
            if paragraph:
                parts.append(paragraph)
                paragraph = []
            if _EXPLICIT.match(stripped):
                i, nested = _explicit_block(lines, i)
                parts.extend(nested)
                continue
            i += 1
            continue
        line = lines[i]
        if stripped.endswith("::"):  # "Example::" introduces a literal block
            line = line.rstrip()[:-2].rstrip()
            line = line + ":" if line.strip() and not line.endswith(":") else line
        paragraph.append(line)
        i += 1
    if paragraph:
        parts.append(paragraph)
    return parts


def _inline(text: str) -> str:
    for pattern, replacement in _INLINE:
        text = pattern.sub(replacement, text)
    return text
