"""Snippets: the part of a chunk around the query's words, with those words marked.

Words are matched as the BM25 leg matches them (its analyzer: lower-cased, stop words
dropped, stemmed), so "penguins" marks "Penguin" and a word the search never looked for
is not marked. A chunk found by meaning alone (the dense leg) has no marked word: its
snippet is its opening.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from retrieval.services.sparse.analyzer import TOKEN_PATTERN

#: A snippet's length in characters (before it is cut back to whole words).
SNIPPET_CHARS = 240
#: Characters of context kept before the first marked word.
LEAD_CHARS = 60
ELLIPSIS = "…"
WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Snippet:
    """A passage of a chunk with the query's words at ``marks`` (offsets into ``text``).

    ``cut_start`` and ``cut_end`` say whether the chunk goes on before or after it.
    """

    text: str
    marks: tuple[tuple[int, int], ...] = ()
    cut_start: bool = False
    cut_end: bool = False

    @property
    def html(self) -> SafeString:
        """Return the passage as HTML: text escaped, each marked word in ``<mark>``."""
        parts, at = [], 0
        for start, end in self.marks:
            parts += [
                escape(self.text[at:start]),
                "<mark>",
                escape(self.text[start:end]),
                "</mark>",
            ]
            at = end
        parts.append(escape(self.text[at:]))
        body = "".join(parts)
        return mark_safe(  # noqa: S308 - every piece of text above is escaped
            f"{ELLIPSIS if self.cut_start else ''}{body}{ELLIPSIS if self.cut_end else ''}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "text": self.text,
            "marks": [list(mark) for mark in self.marks],
            "cut_start": self.cut_start,
            "cut_end": self.cut_end,
            "html": str(self.html),
        }


def snippet(
    text: str,
    terms: frozenset[str],
    analyze: Callable[[str], list[str]],
    *,
    size: int = SNIPPET_CHARS,
) -> Snippet:
    """Return the passage of ``text`` of about ``size`` characters holding the most of the
    query's ``terms``, with every word whose terms (``analyze(word)``) are among them marked."""
    flat = WHITESPACE.sub(" ", text).strip()
    words = [(m.start(), m.end()) for m in TOKEN_PATTERN.finditer(flat)]
    cache: dict[str, frozenset[str]] = {}

    def terms_of(word: str) -> frozenset[str]:
        key = word.lower()
        if key not in cache:
            cache[key] = frozenset(analyze(word)) & terms
        return cache[key]

    matched = [(start, end, terms_of(flat[start:end])) for start, end in words]
    matched = [m for m in matched if m[2]]
    begin = 0
    if matched:
        first = _best_start(matched, size)
        begin = max(0, first - LEAD_CHARS)
        if begin:  # start at a word, not inside one
            space = flat.find(" ", begin, first)
            begin = space + 1 if space >= 0 else first
    end = min(len(flat), begin + size)
    if end < len(flat):
        space = flat.rfind(" ", begin, end + 1)
        if space > begin:
            end = space
    marks = tuple(
        (start - begin, stop - begin)
        for start, stop, _ in matched
        if start >= begin and stop <= end
    )
    return Snippet(text=flat[begin:end], marks=marks, cut_start=begin > 0, cut_end=end < len(flat))


def _best_start(matched: list[tuple[int, int, frozenset[str]]], size: int) -> int:
    """Return where the window of ``size`` characters holding the most distinct terms starts."""
    best, best_count = 0, 0
    for i, (start, _, _) in enumerate(matched):
        seen: set[str] = set()
        for _, other_end, terms in matched[i:]:
            if other_end - start > size - LEAD_CHARS:
                break
            seen |= terms
        if len(seen) > best_count:
            best, best_count = start, len(seen)
    return best
