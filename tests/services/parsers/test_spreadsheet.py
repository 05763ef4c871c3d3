"""Spreadsheets and CSV: real files written by openpyxl and the csv module, read through
every face (API upload, admin upload, retrieval_ingest), and hostile workbooks refused."""

from __future__ import annotations

import csv
import io
import re
import sys
import zipfile
from io import StringIO

import openpyxl
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from openpyxl.utils import get_column_letter
from rest_framework.test import APIClient

from retrieval.exceptions import ParseError, ParserUnavailable
from retrieval.models import Chunk, Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.parsing import parser_for
from retrieval.services.parsers.spreadsheet import CsvParser, XlsxParser
from retrieval.testing.parsers import ParserSuite, assert_well_formed
from tests.conftest import editor

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PEOPLE = [
    ("name", "city", "note"),
    *[(f"person{i}", f"city{i}", f"likes tea number {i}") for i in range(12)],
]
PRICES = [("item", "price"), ("pen", 1.5), ("ink", 3)]


def xlsx_bytes(sheets: dict[str, list[tuple]]) -> bytes:
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv_bytes(rows: list[tuple], **fmt) -> bytes:
    out = io.StringIO()
    csv.writer(out, **fmt).writerows(rows)
    return out.getvalue().encode()


def rewrite_member(data: bytes, name: str, edit) -> bytes:
    """Return the zip ``data`` with member ``name`` passed through ``edit`` (bytes -> bytes)."""
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    assert name in source.namelist()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for member in source.infolist():
            content = source.read(member)
            target.writestr(member.filename, edit(content) if member.filename == name else content)
    return out.getvalue()


def with_dimension(title: str, rows: list[tuple], ref: str) -> bytes:
    """A workbook of one sheet holding ``rows`` whose dimension says ``ref``."""
    return rewrite_member(
        xlsx_bytes({title: rows}),
        "xl/worksheets/sheet1.xml",
        lambda xml: re.sub(rb'<dimension ref="[^"]*"', f'<dimension ref="{ref}"'.encode(), xml),
    )


def declared_huge() -> bytes:
    """A two-cell workbook whose sheet declares 10^6 rows × 10^4 columns."""
    return with_dimension("Big", [("a", "b"), (1, 2)], f"A1:{get_column_letter(10**4)}1000000")


def workbook_sample() -> bytes:
    return xlsx_bytes({"People": PEOPLE, "Prices": PRICES})


class TestCsvParser(ParserSuite):
    sample = ("people.csv", "text/csv", csv_bytes(PEOPLE[:4]))

    def make_parser(self):
        return CsvParser()

    def test_sections_carry_structure(self) -> None:
        # A CSV file is one table: one section, named after the file.
        document = self.make_parser().parse(self.sample[2], filename="people.csv")
        assert [s.heading_path for s in document.sections] == [("people.csv",)]


class TestXlsxParser(ParserSuite):
    sample = ("book.xlsx", XLSX, workbook_sample())

    def make_parser(self):
        return XlsxParser()


def test_a_workbook_is_a_section_per_sheet_of_column_value_rows():
    document = XlsxParser().parse(workbook_sample(), filename="book.xlsx")
    assert_well_formed(document)
    assert [s.heading_path for s in document.sections] == [("People",), ("Prices",)]
    prices = document.sections[1]
    assert (
        document.text[prices.start : prices.end] == "item: pen\nprice: 1.5\n\nitem: ink\nprice: 3"
    )
    assert document.text.startswith("name: person0\ncity: city0\nnote: likes tea number 0\n\n")
    assert document.metadata == {"format": "xlsx", "sheets": 2}


@pytest.mark.parametrize(
    ("name", "data", "delimiter"),
    [
        ("a.csv", csv_bytes(PRICES), ","),
        ("a.csv", csv_bytes(PRICES, delimiter=";"), ";"),
        ("a.tsv", csv_bytes(PRICES, dialect="excel-tab"), "\t"),
    ],
)
def test_csv_and_tsv_dialects_are_found(name, data, delimiter):
    document = CsvParser().parse(data, filename=name)
    assert document.text == "item: pen\nprice: 1.5\n\nitem: ink\nprice: 3"
    assert document.metadata["delimiter"] == delimiter


def test_empty_cells_are_left_out_and_a_header_alone_is_one_line():
    data = csv_bytes([("a", "b", ""), ("", "2", ""), (), ("x", "", "z")])
    assert CsvParser().parse(data, filename="t.csv").text == "b: 2\n\na: x\ncolumn 3: z"
    assert CsvParser().parse(b"a,b\n", filename="t.csv").text == "a | b"


def test_a_declared_ten_billion_cell_sheet_is_refused_before_reading():
    with pytest.raises(ParseError, match=r"'Big' declares 10000000000 cells.*MAX_TABLE_CELLS"):
        XlsxParser().parse(declared_huge(), filename="big.xlsx")


def test_a_dimension_that_lies_small_is_bounded_while_reading(retrieval_settings):
    retrieval_settings(MAX_TABLE_CELLS=100)
    rows = [("a", "b"), *[(i, i) for i in range(60)]]
    data = with_dimension("Long", rows, "A1:A1")
    with pytest.raises(ParseError, match=r"sheet 'Long' has more than 100 cells.*MAX_TABLE_CELLS"):
        XlsxParser().parse(data, filename="long.xlsx")


def test_a_jump_to_a_far_row_is_counted_as_the_rows_it_skips(retrieval_settings):
    retrieval_settings(MAX_TABLE_CELLS=1000)
    data = rewrite_member(
        xlsx_bytes({"Far": [("a",), (1,)]}),
        "xl/worksheets/sheet1.xml",
        lambda xml: xml.replace(b'r="2"', b'r="999999999"').replace(b'"A2"', b'"A999999999"'),
    )
    with pytest.raises(ParseError, match=r"more than 1000 cells"):
        XlsxParser().parse(data, filename="far.xlsx")


def test_too_many_sheets_are_refused(retrieval_settings):
    retrieval_settings(MAX_SHEETS=1)
    with pytest.raises(ParseError, match=r"2 sheets; the limit is 1 \(MAX_SHEETS\)"):
        XlsxParser().parse(workbook_sample(), filename="book.xlsx")


def zip_of(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"name,city\nAda,Paris\n", r"not an Excel workbook \(not a zip\)"),
        (zip_of({"notes.txt": b"hello"}), r"no \[Content_Types\].xml or xl/workbook.xml"),
        (zip_of({"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<nope"}), "readable"),
    ],
    ids=["text", "other-zip", "broken-workbook"],
)
def test_an_xlsx_that_is_not_one_is_refused_with_a_reason(data, reason):
    with pytest.raises(ParseError, match=reason):
        XlsxParser().parse(data, filename="fake.xlsx")


def test_xml_entities_are_refused():
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY lol "lol">'
        b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
    )
    data = rewrite_member(
        workbook_sample(),
        "xl/worksheets/sheet1.xml",
        lambda xml: bomb + xml.replace(b"person0", b"&lol2;"),
    )
    with pytest.raises(ParseError, match=r"declares a DTD or entities, which are refused"):
        XlsxParser().parse(data, filename="bomb.xlsx")


def test_the_archive_limits_apply_before_openpyxl_opens_the_zip(retrieval_settings):
    retrieval_settings(MAX_ARCHIVE_MEMBERS=3)
    with pytest.raises(ParseError, match=r"members; the limit is 3 \(MAX_ARCHIVE_MEMBERS\)"):
        XlsxParser().parse(workbook_sample(), filename="book.xlsx")


def test_a_zip_named_csv_is_refused_with_a_reason():
    with pytest.raises(ParseError, match="zip archive"):
        CsvParser().parse(workbook_sample(), filename="book.csv")


def test_without_openpyxl_an_xlsx_is_unsupported_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # what `import` sees when absent
    with pytest.raises(ParserUnavailable, match=r'pip install "django-retrieval\[office\]"'):
        parser_for(filename="book.xlsx")
    with pytest.raises(ParserUnavailable, match=r"openpyxl is not installed"):
        XlsxParser().parse(workbook_sample(), filename="book.xlsx")
    assert isinstance(parser_for(filename="people.csv"), CsvParser)  # CSV needs no extra


# The faces: API multipart upload, admin upload, retrieval_ingest on a folder.

pytest_db = pytest.mark.django_db


def assert_tables_chunked(collection_slug: str) -> None:
    """Each sheet's chunks carry its name and start with a header's ``column: value`` line."""
    book = Document.objects.get(collection__slug=collection_slug, external_id__endswith="book.xlsx")
    people = Document.objects.get(
        collection__slug=collection_slug, external_id__endswith="people.csv"
    )
    assert book.status == people.status == Document.Status.INDEXED, (book.error, people.error)
    for document, tables in ((book, {"People": PEOPLE, "Prices": PRICES}), (people, None)):
        chunks = list(document.chunks.order_by("index"))
        by_table: dict[str, list[Chunk]] = {}
        for chunk in chunks:
            by_table.setdefault(chunk.heading_path[-1], []).append(chunk)
        expected = tables or {"people.csv": PEOPLE}
        assert set(by_table) == set(expected)
        assert len(by_table[next(iter(expected))]) > 1  # the people table is split
        for name, table_chunks in by_table.items():
            header = expected[name][0]
            for chunk in table_chunks:
                first = chunk.content.split("\n", 1)[0]
                assert first.split(": ", 1)[0] == header[0], chunk.content
                assert all(
                    line.split(": ", 1)[0] in header for line in chunk.content.split("\n") if line
                )


@pytest.fixture
def table_settings(keyword_settings, retrieval_settings):
    """Chunks that hold a row or two of PEOPLE (about 16 tokens a row), not its table."""
    retrieval_settings(
        CHUNKERS={
            "default": {
                "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
                "OPTIONS": {"max_tokens": 40, "min_tokens": 1},
            }
        },
    )


@pytest.fixture
def api(table_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("reader"))
    get_or_create_collection("Sheets")
    return client


@pytest_db
def test_the_api_indexes_a_workbook_and_a_csv(api):
    for name, data, kind in (
        ("book.xlsx", workbook_sample(), XLSX),
        ("people.csv", csv_bytes(PEOPLE), "text/csv"),
    ):
        upload = SimpleUploadedFile(name, data, kind)
        response = api.post("/api/documents/", {"collection": "sheets", "file": upload})
        assert response.status_code == 201, response.json()
    assert_tables_chunked("sheets")


@pytest_db
def test_the_api_answers_415_naming_the_extra_without_openpyxl(api, monkeypatch):
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    upload = SimpleUploadedFile("book.xlsx", workbook_sample(), XLSX)
    response = api.post("/api/documents/", {"collection": "sheets", "file": upload})
    assert response.status_code == 415
    assert 'pip install "django-retrieval[office]"' in response.json()["detail"]
    assert not Document.objects.exists()


@pytest_db
@pytest.mark.parametrize(
    ("data", "reason"),
    # A zip that is not a workbook is a 415 before it is stored (test_sniffing).
    [(declared_huge, "sheet 'Big' declares 10000000000 cells")],
    ids=["declared-huge"],
)
def test_the_api_refuses_a_hostile_workbook_with_its_reason_storing_nothing(api, data, reason):
    upload = SimpleUploadedFile("hostile.xlsx", data(), XLSX)
    response = api.post("/api/documents/", {"collection": "sheets", "file": upload})
    assert response.status_code == 400
    assert f"hostile.xlsx': {reason}" in str(response.json())
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest_db
def test_the_admin_upload_indexes_a_workbook_and_a_csv(admin_client, table_settings):
    collection, _ = get_or_create_collection("Sheets")
    files = [
        SimpleUploadedFile("book.xlsx", workbook_sample(), XLSX),
        SimpleUploadedFile("people.csv", csv_bytes(PEOPLE), "text/csv"),
    ]
    response = admin_client.post(
        reverse("admin:retrieval_document_add"), {"collection": collection.pk, "files": files}
    )
    assert response.status_code == 302
    assert_tables_chunked("sheets")


@pytest_db
def test_the_admin_upload_names_the_extra_without_openpyxl(admin_client, monkeypatch):
    collection, _ = get_or_create_collection("Sheets")
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    upload = SimpleUploadedFile("book.xlsx", workbook_sample(), XLSX)
    response = admin_client.post(
        reverse("admin:retrieval_document_add"), {"collection": collection.pk, "files": [upload]}
    )
    assert response.status_code == 200  # the form again, with the error
    assert "pip install &quot;django-retrieval[office]&quot;" in response.content.decode()
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_indexes_a_folder_of_tables(table_settings, tmp_path, monkeypatch):
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "book.xlsx").write_bytes(workbook_sample())
    (folder / "people.csv").write_bytes(csv_bytes(PEOPLE))
    call_command("retrieval_ingest", str(folder), collection="Sheets", stdout=StringIO())
    assert_tables_chunked("sheets")
    # Without the extra, the workbook is reported failed naming it, not left out unsaid.
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 2 documents failed"):
        call_command("retrieval_ingest", str(folder), collection="Sheets", force=True, stdout=out)
    assert '[office]"' in out.getvalue()
