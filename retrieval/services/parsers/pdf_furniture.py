"""Page furniture: the running headers and footers a printed document repeats on its pages.

A manual prints its name at the top of every page and the page number at the foot. Kept,
they come back in every chunk of every document of a set (and the header, as the first
line, would title them all alike), so lines that open or close every page are dropped.
"""

from __future__ import annotations

import re

#: Lines dropped at most at each edge of a page (a header of a title and a chapter name).
MAX_RUNNING_LINES = 3
_DIGITS = re.compile(r"\d+")


def drop_running_lines(pages: list[str]) -> list[str]:
    """Return the pages without the lines that open or close each of them alike.

    Lines are alike when they differ in their numbers and spaces alone ("Page 3 of 9"; a
    header OCR read with a space fewer). A line is running when every page with text
    shows it at the same edge, or every page but the first (a title page) when there are
    three or more, and none of them is left without text. A document of one page keeps
    all.
    """
    pages = [page.split("\n") for page in pages]
    for edge in (0, -1):
        for _ in range(MAX_RUNNING_LINES):
            if not _drop_edge(pages, edge):
                break
    return ["\n".join(lines) for lines in pages]


def _drop_edge(pages: list[list[str]], edge: int) -> bool:
    """Drop the first (``edge`` 0) or last (-1) line of the pages if it runs; say if it did."""
    edges = [(lines, _edge_index(lines, edge)) for lines in pages]
    edges = [(lines, index) for lines, index in edges if index is not None]
    keys = [_key(lines[index]) for lines, index in edges]
    if len(keys) >= 3 and len(set(keys[1:])) == 1 and keys[0] != keys[1]:
        edges = edges[1:]  # a title page without the running line
    elif len(keys) < 2 or len(set(keys)) != 1:
        return False
    if any(sum(1 for line in lines if line.strip()) < 2 for lines, _ in edges):
        return False  # a page of one line ("Slide 3") is its text, not its furniture
    for lines, index in edges:
        del lines[index]
    return True


def _edge_index(lines: list[str], edge: int) -> int | None:
    """Return the index of the first or last line with text, None for a page without."""
    indexes = range(len(lines)) if edge == 0 else range(len(lines) - 1, -1, -1)
    return next((i for i in indexes if lines[i].strip()), None)


def _key(line: str) -> str:
    # Spaces aside too: OCR reads the same header with and without them ("starlette1.10").
    return "".join(_DIGITS.sub("#", line).casefold().split())
