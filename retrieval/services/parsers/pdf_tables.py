"""Tables on PDF pages (pymupdf's ``find_tables``), read as rows of ``column: value`` lines.

A table is written as a spreadsheet's sheet is (:class:`.tables.TableWriter`): each
row a block of lines labelled by the header's names, so a chunk cut at any row can be
read alone. The page's other text keeps its place: above the table, then the table,
then what stands beside it, then what is below.

``find_tables`` costs about forty times a page's text extraction (a second a page here),
so it runs only on pages whose vector drawings could rule a table (edges at ``MIN_RULES``
heights and places across), and only for the first ``SEARCH_SECONDS`` of a file:
pages after that are read as text, their tables as the lines they print.
"""

from __future__ import annotations

import time
from typing import Any

import pymupdf

from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.tables import TableWriter

#: Fewest heights, and places across, at which a page draws level and upright edges for it
#: to be searched for tables.
MIN_RULES = 3
#: Seconds of a file spent searching its pages for tables; the rest are read as text.
SEARCH_SECONDS = 20.0
#: Drawn edges closer to level than this (points) count as horizontal or vertical.
LEVEL = 1.0


class TableFinder:
    """Finds the tables of one file's pages, within ``SEARCH_SECONDS``."""

    def __init__(self, label: str, budget: ParseBudget, flags: int) -> None:
        self.label, self.budget, self.flags = label, budget, flags
        self.started = time.monotonic()
        self.pages: list[int] = []  # 1-based: the pages where tables were found

    def page_text(self, page: pymupdf.Page) -> str | None:
        """Return the page's text with its tables as rows, or None if it has none."""
        if time.monotonic() - self.started > SEARCH_SECONDS or not _ruled(page):
            return None
        tables = sorted(page.find_tables().tables, key=lambda table: table.bbox[1])
        if not tables:
            return None
        self.pages.append(page.number + 1)
        area, parts, top = page.rect, [], page.rect.y0
        for table in tables:
            box = pymupdf.Rect(table.bbox)
            parts.append(self._text(page, pymupdf.Rect(area.x0, top, area.x1, box.y0)))
            parts.append(self._table(_rows(page, table)))
            parts.append(self._text(page, pymupdf.Rect(area.x0, box.y0, box.x0, box.y1)))
            parts.append(self._text(page, pymupdf.Rect(box.x1, box.y0, area.x1, box.y1)))
            top = max(top, box.y1)
        parts.append(self._text(page, pymupdf.Rect(area.x0, top, area.x1, area.y1)))
        return "\n\n".join(part.strip("\n") for part in parts if part.strip())

    def _table(self, rows: list[list[str]]) -> str:
        writer = TableWriter(self.label, self.budget)
        writer.write(rows)
        return writer.builder.build()[0]

    def _text(self, page: pymupdf.Page, clip: pymupdf.Rect) -> str:
        if clip.is_empty:
            return ""
        return page.get_text("text", clip=clip, sort=True, flags=self.flags)


def _rows(page: pymupdf.Page, table: Any) -> list[list[str]]:
    """Return the table's cells' text by row, a header found above the table first."""
    rows = [
        [" ".join(page.get_textbox(cell).split()) if cell else "" for cell in row.cells]
        for row in table.rows
    ]
    if table.header.external:
        rows.insert(0, [name or "" for name in table.header.names])
    return rows


def _ruled(page: pymupdf.Page) -> bool:
    """Return whether the page draws edges at ``MIN_RULES`` heights and as many places
    across: the fewest a table of two rows and two columns needs (code blocks' boxes and
    rules under headings, stacked one below another, have two places across)."""
    heights: set[int] = set()
    places: set[int] = set()
    for path in page.get_cdrawings():
        for item in path["items"]:
            if item[0] == "re":
                x0, y0, x1, y1 = item[1]
                heights.update((round(y0), round(y1)))
                places.update((round(x0), round(x1)))
            elif item[0] == "l":
                (x1, y1), (x2, y2) = item[1], item[2]
                if abs(y1 - y2) < LEVEL:
                    heights.add(round(y1))
                elif abs(x1 - x2) < LEVEL:
                    places.add(round(x1))
        if len(heights) >= MIN_RULES and len(places) >= MIN_RULES:
            return True
    return False
