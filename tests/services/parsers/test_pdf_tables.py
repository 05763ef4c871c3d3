"""Tables ruled on PDF pages (made by pymupdf) are read as rows of ``column: value`` lines,
in their place among the page's other text."""

from __future__ import annotations

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from retrieval.models import Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.parsers.pdf_tables import _ruled
from retrieval.testing.parsers import assert_well_formed
from tests.conftest import editor

ROWS = [["Item", "Price", "Stock"], ["pen", "1.50", "12"], ["ink", "3.00", "4"]]
BEFORE = "Before the table, a paragraph about stationery."
AFTER = "After the table, a closing note."
AS_ROWS = "Item: pen\nPrice: 1.50\nStock: 12\n\nItem: ink\nPrice: 3.00\nStock: 4"


def draw_table(page: pymupdf.Page, rows: list[list[str]], *, top: float = 200) -> None:
    """Draw ``rows`` as a table of ruled cells, 120 × 20 points each, from ``top``."""
    for i, row in enumerate(rows):
        for j, cell in enumerate(row):
            box = pymupdf.Rect(72 + j * 120, top + i * 20, 192 + j * 120, top + (i + 1) * 20)
            page.draw_rect(box, color=(0, 0, 0), width=0.5)
            page.insert_text((box.x0 + 4, box.y1 - 6), cell, fontsize=10)


def table_pdf() -> bytes:
    with pymupdf.open() as document:
        page = document.new_page()
        page.insert_text((72, 100), BEFORE)
        draw_table(page, ROWS)
        page.insert_text((72, 320), AFTER)
        document.new_page().insert_text((72, 72), "A second page of plain text")
        return document.tobytes()


def test_a_table_is_read_as_rows_between_the_text_above_and_below_it():
    document = PdfParser().parse(table_pdf(), filename="stock.pdf")
    assert_well_formed(document)
    page_one = document.sections[0]
    assert document.text[page_one.start : page_one.end] == f"{BEFORE}\n\n{AS_ROWS}\n\n{AFTER}"
    assert document.text.endswith("\n\nA second page of plain text")
    assert document.metadata == {"page_count": 2, "table_pages": [1]}


def test_tables_can_be_turned_off():
    document = PdfParser(tables=False).parse(table_pdf(), filename="stock.pdf")
    assert "Item: pen" not in document.text and "pen" in document.text
    assert "table_pages" not in document.metadata


def test_only_pages_ruled_enough_for_a_table_are_searched_for_one():
    with pymupdf.open() as document:
        framed = document.new_page()
        framed.draw_rect(framed.rect + (20, 20, -20, -20))  # a border and a rule: no table
        framed.draw_line((72, 90), (500, 90))
        boxes = document.new_page()  # code blocks' boxes, one below another
        for top in (100, 300, 500):
            boxes.draw_rect(pymupdf.Rect(72, top, 500, top + 80), fill=(0.9, 0.9, 0.9))
        draw_table(document.new_page(), ROWS)
        assert [_ruled(page) for page in document] == [False, False, True]


@pytest.mark.django_db
def test_the_api_indexes_a_pdf_table_row_by_row(keyword_settings):
    client = APIClient()
    client.force_authenticate(editor("reader"))
    get_or_create_collection("Stock")
    upload = SimpleUploadedFile("stock.pdf", table_pdf(), "application/pdf")
    response = client.post("/api/documents/", {"collection": "stock", "file": upload})
    assert response.status_code == 201, response.json()
    chunks = [chunk.content for chunk in Document.objects.get().chunks.order_by("index")]
    assert any(chunk.startswith("Item: ink\nPrice: 3.00") for chunk in chunks), chunks
