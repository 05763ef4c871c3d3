"""Spreadsheets: CSV/TSV (stdlib ``csv``) and Excel workbooks (``openpyxl``, the ``office`` extra).

A table is read as its rows, each a block of ``column: value`` lines (empty cells left
out) with a blank line between rows; the first row with a value is the header. Every
value is labelled by its column, so a chunk cut at any row boundary (the recursive
chunker cuts at blank lines first) starts with a header line and can be read alone,
whatever the chunk size; a row restating the header costs tokens, but a separate
header line cannot be repeated in each chunk by a parser that does not know where
chunks will end. A sheet is a section whose heading path is the sheet's name (a CSV
file's: the file's name), which each chunk's header carries.

Work per file is bounded: ``MAX_SHEETS`` sheets and ``MAX_TABLE_CELLS`` cells (rows ×
columns, all sheets together), checked from a sheet's declared dimension before it is
read and again while reading, since a dimension can lie; a workbook's zip is checked
against the archive limits (``MAX_ARCHIVE_*``) before openpyxl opens it, and its XML
is read through ``defusedxml`` (no entity expansion, no external entities).
"""

from __future__ import annotations

import csv
import datetime
import io
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Any, ClassVar

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import (
    TextBuilder,
    decode_text,
    file_label,
    stem_title,
)
from retrieval.services.types import ParsedDocument
from retrieval.services.validation.archives import ArchiveError, check_declared

INSTALL_HINT = 'install the office extra: pip install "django-retrieval[office]"'
#: Longest column name kept: a name is repeated on every row.
HEADER_MAX_CHARS = 100
#: Bytes of a CSV file the dialect (delimiter, quoting) is guessed from.
SNIFF_BYTES = 8192
#: Rows read between checks of ``MAX_PARSE_SECONDS``.
ROWS_PER_CHECK = 1000
#: What every Office Open XML workbook holds.
WORKBOOK_PARTS = ("[Content_Types].xml", "xl/workbook.xml")


class _Table:
    """Writes tables into one document, counting cells against ``MAX_TABLE_CELLS``."""

    def __init__(self, label: str, budget: ParseBudget) -> None:
        self.label = label
        self.budget = budget
        self.builder = TextBuilder()
        self.max_cells = int(retrieval_settings.MAX_TABLE_CELLS)
        self.cells = 0  # rows × columns of the tables written before this one

    def check_declared(self, declared: int, what: str) -> None:
        """Refuse tables declaring ``declared`` cells in all (``what`` says so), unread."""
        if declared > self.max_cells:
            raise self._too_many(f"{what} (rows × columns)")

    def write(self, rows: Iterable[Sequence[Any]], *, heading_path: tuple[str, ...]) -> None:
        """Write one table as a section; its first row holding a value is the header.

        A table of nothing but its header is written as the header's names on one line.
        """
        self.builder.open_section(heading_path=heading_path)
        where = f"sheet {heading_path[-1]!r}" if heading_path else "the table"
        header: list[str] = []
        count = width = written = 0
        for count, row in enumerate(rows, start=1):
            width = max(width, len(row))
            # Counted as a rectangle, so that rows with no cells (a jump to row 10^9) count.
            if self.cells + count * max(width, 1) > self.max_cells:
                raise self._too_many(f"{where} has more than {self.max_cells - self.cells} cells")
            if count % ROWS_PER_CHECK == 0:
                self.budget.check(f"at row {count} of {where}")
            values = [_cell_text(value) for value in row]
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

    def _write_row(self, header: list[str], values: list[str]) -> None:
        self.builder.block_break()
        for index, value in enumerate(values):
            if value:
                name = header[index] if index < len(header) else _column_name("", index)
                self.builder.line_break()
                self.builder.write_lines(f"{name}: {value}")

    def _too_many(self, what: str) -> ParseError:
        return ParseError(
            f"Cannot parse {self.label}: {what}; the limit is {self.max_cells} "
            "(MAX_TABLE_CELLS). Split it into smaller files."
        )


def _column_name(value: str, index: int) -> str:
    return value[:HEADER_MAX_CHARS].rstrip() or f"column {index + 1}"


def _cell_text(value: Any) -> str:
    """Return a cell's value as one line of text; an empty cell as ``""``."""
    if value is None:
        return ""
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        value = value.date()  # a date cell: Excel stores it as midnight
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return " ".join(str(value).split())


class CsvParser(BaseParser):
    """Read a CSV or TSV file as one table: its dialect guessed, its encoding detected."""

    mime_types: ClassVar[tuple[str, ...]] = ("text/csv", "text/tab-separated-values")
    extensions: ClassVar[tuple[str, ...]] = (".csv", ".tsv")

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the rows as ``column: value`` lines, in one section named after the file."""
        label = file_label(filename)
        if data.startswith(b"PK\x03\x04"):
            raise ParseError(
                f"Cannot parse {label}: it is a zip archive (an Excel workbook?), not CSV text."
            )
        text, encoding = decode_text(data, filename=filename)
        if not text.strip():
            raise ParseError(f"Cannot parse {label}: it is empty.")
        dialect = _dialect(text, filename)
        reader = csv.reader(io.StringIO(text, newline=""), dialect)
        table = _Table(label, ParseBudget(label))
        try:
            table.write(reader, heading_path=(PurePath(filename).name,) if filename else ())
        except csv.Error as e:
            raise ParseError(f"Cannot parse {label}: line {reader.line_num}: {e}.") from e
        text, sections = table.builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: it has no values.")
        return ParsedDocument(
            text=text,
            title=stem_title(filename),
            sections=sections,
            metadata={"format": "csv", "encoding": encoding, "delimiter": dialect.delimiter},
        )


def _dialect(text: str, filename: str | None) -> type[csv.Dialect]:
    """Return the dialect of ``text``: tabs for a ``.tsv`` file, else guessed, else commas."""
    if filename and PurePath(filename).suffix.lower() == ".tsv":
        return csv.excel_tab
    try:
        return csv.Sniffer().sniff(text[:SNIFF_BYTES], delimiters=",;\t|")
    except csv.Error:  # one column, or too irregular to tell
        return csv.excel


class XlsxParser(BaseParser):
    """Read an Excel workbook (``.xlsx``): a section per worksheet, cached formula values."""

    mime_types: ClassVar[tuple[str, ...]] = (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    )
    extensions: ClassVar[tuple[str, ...]] = (".xlsx",)

    def unavailable(self) -> str:
        """Name the extra to install when openpyxl, or defusedxml under it, is missing."""
        try:
            import openpyxl  # noqa: F401 (the package itself, first)
            from openpyxl.xml import DEFUSEDXML
        except ImportError:
            return f"openpyxl is not installed; {INSTALL_HINT}."
        if not DEFUSEDXML:  # openpyxl would then expand entities declared in the XML
            return (
                "defusedxml is not installed (or OPENPYXL_DEFUSEDXML is off), so the "
                f"workbook's XML cannot be read safely; {INSTALL_HINT}."
            )
        return ""

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return each worksheet's rows as ``column: value`` lines, a section per sheet."""
        label = file_label(filename)
        self.check_readable(data, label)
        _check_workbook_zip(data, label)
        table = _Table(label, ParseBudget(label))
        workbook = _load(data, label)
        try:
            sheets = workbook.worksheets
            _check_sheets(sheets, table)
            for sheet in sheets:
                table.budget.check(f"before sheet {sheet.title!r}")
                sheet.reset_dimensions()  # read the cells there are, not what was declared
                table.write(sheet.iter_rows(values_only=True), heading_path=(sheet.title,))
        except ParseError:
            raise
        except Exception as e:  # openpyxl's own errors, and defusedxml's refusals
            raise _unreadable(label, e) from e
        finally:
            workbook.close()
        text, sections = table.builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: its sheets have no values.")
        return ParsedDocument(
            text=text,
            title=(workbook.properties.title or "").strip() or stem_title(filename),
            sections=sections,
            metadata={"format": "xlsx", "sheets": len(sheets)},
        )


def _check_workbook_zip(data: bytes, label: str) -> None:
    """Refuse bytes that are not an Office Open XML workbook, or a zip over a limit."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            check_declared(archive)
            names = set(archive.namelist())
    except zipfile.BadZipFile as e:
        raise ParseError(f"Cannot parse {label}: it is not an Excel workbook (not a zip).") from e
    except ArchiveError as e:
        raise ParseError(f"Cannot parse {label}: {e}") from e
    missing = [part for part in WORKBOOK_PARTS if part not in names]
    if missing:
        raise ParseError(
            f"Cannot parse {label}: it is not an Excel workbook (the zip has no "
            f"{' or '.join(missing)})."
        )


def _load(data: bytes, label: str) -> Any:
    """Return the workbook opened to stream its rows, with cached values for formulas."""
    import openpyxl

    try:
        return openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as e:  # openpyxl raises KeyError, ValueError, its own errors ...
        raise _unreadable(label, e) from e


def _unreadable(label: str, error: Exception) -> ParseError:
    """Return the ParseError for a workbook openpyxl cannot read, naming refused XML."""
    from defusedxml import DefusedXmlException

    cause: BaseException | None = error
    for _ in range(8):  # openpyxl wraps the parser's error in its own
        if cause is None:
            break
        if isinstance(cause, DefusedXmlException):
            return ParseError(
                f"Cannot parse {label}: its XML declares a DTD or entities, which are refused "
                f"({cause!r})."
            )
        cause = cause.__cause__ or cause.__context__
    return ParseError(f"Cannot parse {label}: it is not a readable workbook ({error!r}).")


def _check_sheets(sheets: list[Any], table: _Table) -> None:
    """Refuse more than ``MAX_SHEETS`` sheets, or declared dimensions over ``MAX_TABLE_CELLS``."""
    max_sheets = int(retrieval_settings.MAX_SHEETS)
    if len(sheets) > max_sheets:
        raise ParseError(
            f"Cannot parse {table.label}: it has {len(sheets)} sheets; the limit is "
            f"{max_sheets} (MAX_SHEETS). Split it into smaller files."
        )
    declared = 0
    for sheet in sheets:
        if sheet.max_row and sheet.max_column:
            rows = sheet.max_row - sheet.min_row + 1
            cells = rows * (sheet.max_column - sheet.min_column + 1)
            declared += cells
            table.check_declared(
                declared,
                f"sheet {sheet.title!r} declares {cells} cells"
                if declared == cells
                else f"its sheets up to {sheet.title!r} declare {declared} cells",
            )
