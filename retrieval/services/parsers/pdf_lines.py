"""A PDF page's lines as a reader takes them: paragraphs unwrapped, margins not indents.

MuPDF gives a page's text line by line as it is laid out: a paragraph broken wherever
the column ended, and every line indented by its distance from the page's leftmost
text (a running header set further out indents the whole body). Kept, a paragraph's
words are parted by line breaks the chunker splits at before sentence ends, and the
spaces cost tokens in every chunk. So a line that runs on (the next line's first word
no longer fit after it) is joined to the next one, and the indentation the page's
lines share is removed; indentation within (code, nested lists) stays.
"""

from __future__ import annotations

import re
from itertools import pairwise

import pymupdf

from retrieval.services.parsers.layout import LIST_MARKER

_WHITESPACE = re.compile(r"\s+")


def reflow(text: str, running_on: frozenset[str]) -> str:
    """Return a page's ``text`` with each line in ``running_on`` joined to the next."""
    lines = text.split("\n")
    joined: list[str] = []
    runs_on = False
    for line in lines:
        if runs_on and line.strip():
            joined[-1] = f"{joined[-1].rstrip()} {line.strip()}"
        else:
            joined.append(line)
        runs_on = bool(line.strip()) and one_line(line) in running_on
    return "\n".join(joined)


def running_on(page: pymupdf.Page, blocks: list[dict]) -> frozenset[str]:
    """Return the text of each line in ``blocks`` (a page's text as a dict) that runs on."""
    found = set()
    for block in blocks:
        lines = [line for line in block.get("lines", ()) if line_text(line).strip()]
        for line, following in pairwise(lines):
            if runs_on(page, line, following):
                found.add(one_line(line_text(line)))
    return frozenset(found)


def runs_on(page: pymupdf.Page, line: dict, following: dict) -> bool:
    """Return whether ``following``'s first word would not have fit at the end of ``line``."""
    span = next(span for span in following["spans"] if span["text"].strip())
    word = span["text"].split()[0]
    if LIST_MARKER.fullmatch(word):  # a list item starts: the line above ended its own
        return False
    x0, _, x1, _ = span["bbox"]
    word_width = (x1 - x0) * len(word) / max(len(span["text"]), 1)
    # The column's right edge: as far from the page's right side as its text is from the left.
    right = max(page.rect.width - line["bbox"][0], following["bbox"][2], line["bbox"][2])
    space = span["size"] / 3
    return line["bbox"][2] + space + word_width > right


def line_text(line: dict) -> str:
    return "".join(span["text"] for span in line["spans"])


def one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()
