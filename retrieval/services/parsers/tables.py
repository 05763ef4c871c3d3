"""Tables written as text: each row a block of ``column: value`` lines under its header.

Every value is labelled by its column, so a chunk cut at any row boundary (the recursive
chunker cuts at blank lines first) starts with a header line and can be read alone,
whatever the chunk size; a row restating the header costs tokens, but a separate header
line cannot be repeated in each chunk by a parser that does not know where chunks will
end. Spreadsheets, Word, PowerPoint and OpenDocument tables are all written this way,
their cells counted together against ``MAX_TABLE_CELLS``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import Any

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import TextBuilder

#: Longest column name kept: a name is repeated on every row.
HEADER_MAX_CHARS = 100
#: Rows read between checks of ``MAX_PARSE_SECONDS``.
ROWS_PER_CHECK = 1000


class TableWriter:
    """Writes tables into one document, counting cells against ``MAX_TABLE_CELLS``."""

    def __init__(self, label: str, budget: ParseBudget, builder: TextBuilder | None = None) -> None:
        self.label = label
        self.budget = budget
        self.builder = builder or TextBuilder()
        self.max_cells = int(retrieval_settings.MAX_TABLE_CELLS)
        self.cells = 0  # rows × columns of the tables written before this one

    def check_declared(self, declared: int, what: str) -> None:
        """Refuse tables declaring ``declared`` cells in all (``what`` says so), unread."""
        if declared > self.max_cells:
            raise self.too_many(f"{what} (rows × columns)")

    def write_section(
        self, rows: Iterable[Sequence[Any]], *, heading_path: tuple[str, ...]
    ) -> None:
        """Write one table as a section named by ``heading_path`` (a sheet)."""
        self.builder.open_section(heading_path=heading_path)
        where = f"sheet {heading_path[-1]!r}" if heading_path else "the table"
        self.write(rows, where=where)

    def write(self, rows: Iterable[Sequence[Any]], *, where: str = "the table") -> None:
        """Write one table where the text is; its first row holding a value is the header.

        A table of nothing but its header is written as the header's names on one line.
        """
        self.builder.block_break()
        header: list[str] = []
        count = width = written = 0
        for count, row in enumerate(rows, start=1):
            width = max(width, len(row))
            # Counted as a rectangle, so that rows with no cells (a jump to row 10^9) count.
            if self.cells + count * max(width, 1) > self.max_cells:
                raise self.too_many(f"{where} has more than {self.max_cells - self.cells} cells")
            if count % ROWS_PER_CHECK == 0:
                self.budget.check(f"at row {count} of {where}")
            values = [cell_text(value) for value in row]
            if not any(values):
                continue
            if not header:
                header = [_column_name(value, index) for index, value in enumerate(values)]
                continue
            self._write_row(header, values)
            written += 1
        if header and not written:
            self.builder.write_lines(" | ".join(header))
        self.cells += count * max(width, 1)
        self.builder.block_break()

    def _write_row(self, header: list[str], values: list[str]) -> None:
        self.builder.block_break()
        for index, value in enumerate(values):
            if value:
                name = header[index] if index < len(header) else _column_name("", index)
                self.builder.line_break()
                self.builder.write_lines(f"{name}: {value}")

    def too_many(self, what: str) -> ParseError:
        """Return the ParseError for tables over ``MAX_TABLE_CELLS``; ``what`` says how."""
        return ParseError(
            f"Cannot parse {self.label}: {what}; the limit is {self.max_cells} "
            "(MAX_TABLE_CELLS). Split it into smaller files."
        )


def _column_name(value: str, index: int) -> str:
    return value[:HEADER_MAX_CHARS].rstrip() or f"column {index + 1}"


def cell_text(value: Any) -> str:
    """Return a cell's value as one line of text; an empty cell as ``""``."""
    if value is None:
        return ""
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        value = value.date()  # a date cell: Excel stores it as midnight
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return " ".join(str(value).split())
