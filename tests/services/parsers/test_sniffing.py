"""A file's kind is decided by its bytes where they can tell, not by its name alone."""

from __future__ import annotations

import io
import zipfile

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from retrieval.exceptions import UnsupportedFileType
from retrieval.models import Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.parsing import parse, parser_for
from retrieval.services.parsers.pdf import PdfParser
from retrieval.services.parsers.sniffing import ZIP, describe, sniff
from retrieval.services.parsers.spreadsheet import XlsxParser
from tests.conftest import editor
from tests.services.parsers.test_spreadsheet import workbook_sample

WORD = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def zip_of(members: dict[str, bytes], *, stored_first: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if stored_first:
            archive.writestr("mimetype", stored_first, compress_type=zipfile.ZIP_STORED)
        for name, content in members.items():
            archive.writestr(name, content)
    return out.getvalue()


def pdf_bytes(text: str) -> bytes:
    with pymupdf.open() as document:
        document.new_page().insert_text((72, 72), text)
        return document.tobytes()


def png_bytes() -> bytes:
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    return pixmap.tobytes("png")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (lambda: pdf_bytes("hello"), "application/pdf"),
        (png_bytes, "image/png"),
        (lambda: b"\xff\xd8\xff\xe0" + bytes(16), "image/jpeg"),
        (lambda: b"II*\x00" + bytes(16), "image/tiff"),
        (lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(16), "application/x-ole-storage"),
        (workbook_sample, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        (lambda: zip_of({"[Content_Types].xml": b"<x/>", "word/document.xml": b"<w/>"}), WORD),
        (
            lambda: zip_of(
                {"content.xml": b"<x/>"}, stored_first="application/vnd.oasis.opendocument.text"
            ),
            "application/vnd.oasis.opendocument.text",
        ),
        (
            lambda: zip_of(
                {"META-INF/container.xml": b"<x/>"}, stored_first="application/epub+zip"
            ),
            "application/epub+zip",
        ),
        (lambda: zip_of({"a.txt": b"hi"}), ZIP),
        (lambda: b"PK\x03\x04 a damaged zip", ZIP),
        (lambda: b"# A heading\n\nplain text", None),
        (lambda: b'{"json": true}', None),
    ],
    ids=[
        "pdf",
        "png",
        "jpeg",
        "tiff",
        "ole2",
        "xlsx",
        "docx",
        "odt",
        "epub",
        "zip",
        "bad-zip",
        "text",
        "json",
    ],
)
def test_the_bytes_say_what_a_file_is(data, expected):
    assert sniff(data()) == expected


def test_a_bmp_is_told_by_its_header_not_by_two_letters():
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, format="BMP")
    assert sniff(out.getvalue()) == "image/bmp"
    assert sniff(b"BM25 (Okapi BM25) is a ranking function for keyword search.") is None


def test_a_mimetype_member_that_is_not_one_is_ignored():
    assert sniff(zip_of({"a": b"x"}, stored_first="not a type at all " * 20)) == ZIP


def test_a_kind_is_named_as_a_person_says_it():
    assert describe(WORD) == "a Word document"
    assert describe("image/png") == "a PNG image"
    assert describe("application/vnd.oasis.opendocument.text") == "an OpenDocument file (text)"


@pytest.mark.django_db
def test_a_pdf_named_as_text_is_read_as_the_pdf_it_is():
    parsed, parser = parse(pdf_bytes("the quarterly figures"), filename="notes.txt")
    assert isinstance(parser, PdfParser)
    assert "quarterly figures" in parsed.text


@pytest.mark.django_db
def test_a_workbook_named_csv_is_read_as_a_workbook():
    assert isinstance(parser_for(filename="book.csv", data=workbook_sample()), XlsxParser)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        ("report.xlsx", lambda: zip_of({"a.txt": b"hi"}), "a zip archive (its name says .xlsx)"),
        ("scan.pdf", lambda: b"GIF89a" + bytes(16), "a GIF image (its name says .pdf)"),
        ("notes.txt", lambda: b"Rar!\x1a\x07\x00junk", "a RAR archive (its name says .txt)"),
    ],
)
def test_a_file_that_is_not_what_its_name_says_is_refused_naming_both(name, data, said):
    with pytest.raises(UnsupportedFileType, match="no configured parser reads") as refused:
        parse(data(), filename=name)
    assert f"its content is {said}" in str(refused.value)


@pytest.mark.django_db
def test_the_api_answers_415_for_a_zip_named_xlsx_storing_nothing():
    client = APIClient()
    client.force_authenticate(editor("reader"))
    get_or_create_collection("Sheets")
    upload = SimpleUploadedFile(
        "report.xlsx",
        zip_of({"a.txt": b"hi"}),
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    )
    response = client.post("/api/documents/", {"collection": "sheets", "file": upload})
    assert response.status_code == 415
    assert "its content is a zip archive" in response.json()["detail"]
    assert not Document.objects.exists()


def test_a_zip_whose_directory_zipfile_refuses_is_a_zip_not_a_crash():
    # "version needed to extract" 20.0 (200): zipfile raises NotImplementedError on opening.
    data = bytearray(zip_of({"a.txt": b"hi"}))
    central = data.rindex(b"PK\x01\x02")
    data[central + 6 : central + 8] = (200).to_bytes(2, "little")
    assert sniff(bytes(data)) == ZIP
