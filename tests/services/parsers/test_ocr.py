"""OCR: images and scanned PDF pages made by the tests (text drawn by pymupdf, rendered to
pixels), read by RapidOCR's shipped models through every face; hostile images refused."""

from __future__ import annotations

import io
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from io import StringIO

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from PIL import Image
from rest_framework.test import APIClient

import retrieval
from retrieval.exceptions import ParseError, ParserUnavailable
from retrieval.models import Chunk, Document
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.parsing import parse, parser_for
from retrieval.services.parsers import ocr
from retrieval.services.parsers.image import ImageParser
from retrieval.services.parsers.ocr import Line, paragraphs
from retrieval.services.parsers.pdf import PdfParser
from retrieval.testing.parsers import ParserSuite, assert_well_formed
from tests.conftest import editor
from tests.services.parsers.scans import (
    image_bytes,
    png_header,
    scanned_pdf,
    tiff_bytes,
)

STORMS = "The lighthouse keeper counted forty storms."
ZEBRAS = "Zebras prefer violins at dawn."
WITHOUT_OCR = 'pip install "django-retrieval[ocr]"'


def without_ocr(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "rapidocr_onnxruntime", None)  # what `import` sees


# Reading order, on boxes laid out by hand (no model involved).


def line(left: float, top: float, text: str, width: float = 100) -> Line:
    return Line(left, top, left + width, top + 10, text)


def test_lines_are_read_column_by_column_and_joined_into_paragraphs():
    lines = [
        line(0, 0, "A title across", width=300),
        line(200, 20, "right one"),  # the right column, listed first
        line(0, 20, "left one"),
        line(0, 32, "left two hyphen-"),
        line(200, 32, "right two"),
        line(0, 44, "ated word"),
        line(200, 44, "right three"),
        line(200, 56, "right four"),
        line(0, 70, "left, a new paragraph"),
    ]
    assert paragraphs(lines) == [
        "A title across",
        "left one left two hyphenated word",
        "left, a new paragraph",
        "right one right two right three right four",
    ]


def test_rows_ending_short_of_the_margin_end_their_line():
    # 10 pixels a character: a row ending 8 characters or more before the edge ends a line.
    lines = [
        line(0, 0, "Wrapped prose runs to the margin", width=320),
        line(0, 12, "and on to the next row.", width=230),
        line(0, 24, "async def app(scope):", width=210),
        line(0, 36, "await send(scope)", width=170),
        line(0, 48, "\u00b7 content - A string or bytes, or", width=320),
        line(0, 60, "a stream.", width=90),
        line(0, 72, "\u00b7 status_code - An integer.", width=280),
    ]
    assert paragraphs(lines) == [
        "Wrapped prose runs to the margin and on to the next row.\n"
        "async def app(scope):\nawait send(scope)\n"
        "\u00b7 content - A string or bytes, or a stream.\n"
        "\u00b7 status_code - An integer."
    ]


def test_boxes_on_one_row_are_read_left_to_right():
    assert paragraphs([line(150, 1, "world"), line(0, 0, "hello", width=140)]) == ["hello world"]
    assert paragraphs([]) == []


# The image parser.


class TestImageParser(ParserSuite):
    # Two pages, so two sections: a TIFF's pages are the image's structure.
    sample = ("scan.tiff", "image/tiff", tiff_bytes([STORMS, ZEBRAS]))

    def make_parser(self):
        return ImageParser()

    def test_it_accepts_its_mime_type_and_extension(self) -> None:
        # The sample is a TIFF, for its pages; the parser's first (default) type is PNG.
        self.sample = ("scan.png", "image/png", self.sample[2])
        super().test_it_accepts_its_mime_type_and_extension()
        assert ImageParser().accepts(mime_type="image/tiff", filename="scan.tif")


@pytest.mark.parametrize("kind", ["png", "jpg"])
def test_an_image_s_words_are_read(kind):
    document = ImageParser().parse(image_bytes(f"{STORMS}\n\n{ZEBRAS}", kind), filename=f"a.{kind}")
    assert document.text == f"{STORMS}\n\n{ZEBRAS}"
    assert document.title == "a"
    assert document.metadata == {
        "format": "png" if kind == "png" else "jpeg",
        "page_count": 1,
        "ocr": True,
    }


def test_threads_share_one_engine_and_each_gets_its_own_image_s_text():
    images = [Image.open(io.BytesIO(image_bytes(text))) for text in (STORMS, ZEBRAS)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        assert list(pool.map(ocr.read_text, images)) == [STORMS, ZEBRAS]
    assert ocr._load() is ocr._load()  # loaded once per process


def test_a_tiff_s_pages_are_sections():
    document = ImageParser().parse(TestImageParser.sample[2], filename="scan.tiff")
    assert_well_formed(document)
    assert [s.page for s in document.sections] == [1, 2]
    assert [document.text[s.start : s.end] for s in document.sections] == [STORMS, ZEBRAS]
    # One scanned document: the second page goes on from the first, as a PDF's pages do.
    assert [s.continues for s in document.sections] == [False, True]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            png_header(20_000, 20_000),
            r"more pixels than the limit of 50000000 \(MAX_IMAGE_PIXELS\)",
        ),
        (
            png_header(8_000, 7_000),
            r"8000 × 7000 pixels; the limit is 50000000 \(MAX_IMAGE_PIXELS\)",
        ),
        (b"just some text, named .png", r"not a readable PNG / JPEG / TIFF / WEBP / BMP image"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, r"not a readable PNG"),
        (image_bytes(STORMS)[:2000], r"page 1 cannot be decoded"),
    ],
    ids=["20000x20000", "over-the-setting", "text", "bad-png", "truncated"],
)
def test_a_hostile_image_is_refused_with_a_reason(data, reason):
    with pytest.raises(ParseError, match=reason):
        ImageParser().parse(data, filename="hostile.png")


def test_a_tiff_of_too_many_pages_is_refused_before_any_is_read(retrieval_settings):
    retrieval_settings(MAX_OCR_PAGES=1)
    with pytest.raises(ParseError, match=r"2 pages or more; the limit is 1 \(MAX_OCR_PAGES\)"):
        ImageParser().parse(TestImageParser.sample[2], filename="scan.tiff")


def test_the_ocr_time_budget_stops_a_file(retrieval_settings):
    retrieval_settings(MAX_OCR_SECONDS=0)
    with pytest.raises(ParseError, match=r"by OCR took more than 0 s \(MAX_OCR_SECONDS\)"):
        ImageParser().parse(image_bytes(STORMS), filename="a.png")


def test_without_the_ocr_extra_an_image_is_unsupported_naming_it(monkeypatch):
    without_ocr(monkeypatch)
    with pytest.raises(ParserUnavailable, match=WITHOUT_OCR.replace("[", r"\[")):
        parser_for(filename="a.png", data=image_bytes(STORMS))
    with pytest.raises(ParserUnavailable, match="rapidocr_onnxruntime is missing"):
        ImageParser().parse(image_bytes(STORMS), filename="a.png")


# Scanned PDF pages.


def test_scanned_pdf_pages_are_read_by_ocr_in_order_with_text_pages():
    with pymupdf.open(stream=scanned_pdf([STORMS, ZEBRAS]), filetype="pdf") as document:
        page = document.new_page(pno=1, width=320, height=110)  # a text page between scans
        page.insert_text((20, 40), "A page with a text layer")
        data = document.tobytes()
    document = PdfParser().parse(data, filename="scan.pdf")
    assert_well_formed(document)
    assert [document.text[s.start : s.end] for s in document.sections] == [
        STORMS,
        "A page with a text layer",
        ZEBRAS,
    ]
    assert [s.page for s in document.sections] == [1, 2, 3]
    assert document.metadata == {"page_count": 3, "ocr_pages": [1, 3]}


def test_without_the_ocr_extra_a_scanned_pdf_fails_naming_it(monkeypatch):
    without_ocr(monkeypatch)
    with pytest.raises(ParseError, match=r"no text layer \(a scanned document\?\).*\[ocr\]"):
        PdfParser().parse(scanned_pdf([STORMS]), filename="scan.pdf")
    with pytest.raises(ParseError, match=r"OCR is turned off"):
        PdfParser(ocr=False).parse(scanned_pdf([STORMS]), filename="scan.pdf")


def test_without_the_extra_a_pdf_s_text_pages_are_read_and_its_scans_named(monkeypatch):
    without_ocr(monkeypatch)
    with pymupdf.open(stream=scanned_pdf([STORMS]), filetype="pdf") as document:
        document.new_page().insert_text((72, 72), "Typed text")
        data = document.tobytes()
    document = PdfParser().parse(data, filename="mixed.pdf")
    assert document.text == "Typed text"
    assert document.metadata == {"page_count": 2, "pages_without_text": [1]}


def test_a_pdf_of_2000_scanned_pages_is_refused_before_ocr():
    data = scanned_pdf([image_bytes("x")] * 2000)  # one small image, drawn on every page
    with pytest.raises(ParseError, match=r"2000 pages with no text layer .*\(MAX_OCR_PAGES\)"):
        PdfParser().parse(data, filename="scans.pdf")


def test_an_image_on_a_scanned_page_over_the_pixel_limit_is_refused(retrieval_settings):
    retrieval_settings(MAX_IMAGE_PIXELS=10_000)
    with pytest.raises(
        ParseError, match=r"an image on page 1 is \d+ × \d+ pixels.*MAX_IMAGE_PIXELS"
    ):
        PdfParser().parse(scanned_pdf([STORMS]), filename="scan.pdf")


# The faces: API multipart upload, admin upload, retrieval_ingest on a folder.


def found(query: str, slug: str) -> list[str]:
    """Return the external ids of the documents a search of ``slug`` finds, best first."""
    results = retrieval.search(query, collection=slug, top_k=3, scope=Scope.ALL)
    return [result.chunk.document.external_id for result in results]


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("reader"))
    get_or_create_collection("Scans")
    return client


@pytest.mark.django_db
def test_the_api_indexes_an_image_whose_words_are_searchable(api):
    upload = SimpleUploadedFile("storms.png", image_bytes(STORMS), "image/png")
    response = api.post("/api/documents/", {"collection": "scans", "file": upload})
    assert response.status_code == 201, response.json()
    assert found("lighthouse storms", "scans")[0].endswith("storms.png")


@pytest.mark.django_db
def test_the_api_refuses_hostile_images_storing_nothing(api, monkeypatch):
    for name, data, reason in (
        ("huge.png", png_header(20_000, 20_000), "MAX_IMAGE_PIXELS"),
        ("fake.png", b"not an image at all", "not a readable PNG"),
    ):
        upload = SimpleUploadedFile(name, data, "image/png")
        response = api.post("/api/documents/", {"collection": "scans", "file": upload})
        assert response.status_code == 400, response.json()
        assert reason in str(response.json())
    without_ocr(monkeypatch)
    upload = SimpleUploadedFile("storms.png", image_bytes(STORMS), "image/png")
    response = api.post("/api/documents/", {"collection": "scans", "file": upload})
    assert response.status_code == 415
    assert WITHOUT_OCR in response.json()["detail"]
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest.mark.django_db
def test_the_admin_upload_indexes_a_scanned_pdf_and_a_jpeg(admin_client, keyword_settings):
    collection, _ = get_or_create_collection("Scans")
    files = [
        SimpleUploadedFile("scan.pdf", scanned_pdf([STORMS]), "application/pdf"),
        SimpleUploadedFile("zebras.jpg", image_bytes(ZEBRAS, "jpg"), "image/jpeg"),
    ]
    response = admin_client.post(
        reverse("admin:retrieval_document_add"), {"collection": collection.pk, "files": files}
    )
    assert response.status_code == 302
    assert found("lighthouse storms", "scans")[0].endswith("scan.pdf")
    assert found("zebras violins", "scans")[0].endswith("zebras.jpg")


@pytest.mark.django_db
def test_the_admin_upload_names_the_extra_without_it(admin_client, monkeypatch):
    collection, _ = get_or_create_collection("Scans")
    without_ocr(monkeypatch)
    upload = SimpleUploadedFile("storms.png", image_bytes(STORMS), "image/png")
    response = admin_client.post(
        reverse("admin:retrieval_document_add"), {"collection": collection.pk, "files": [upload]}
    )
    assert response.status_code == 200  # the form again, with the error
    assert "pip install &quot;django-retrieval[ocr]&quot;" in response.content.decode()
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_indexes_a_folder_of_images_and_the_demo_s_scan(
    keyword_settings, tmp_path, sample_docs
):
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "pages.tiff").write_bytes(TestImageParser.sample[2])
    # As `dev.py demo` does: its scanned page is written at start-up, then ingested.
    demo = tmp_path / "demo"
    subprocess.check_call([sys.executable, str(sample_docs / "build_scanned_page.py"), str(demo)])
    call_command("retrieval_ingest", str(folder), str(demo), collection="Scans", stdout=StringIO())
    document = Document.objects.get(external_id__endswith="pages.tiff")
    assert document.status == Document.Status.INDEXED, document.error
    assert found("zebras violins", "scans")[0].endswith("pages.tiff")
    assert {chunk.page for chunk in document.chunks.all()} == {1, 2}
    notice = Document.objects.get(external_id__endswith="scanned-notice.pdf")
    assert notice.status == Document.Status.INDEXED, notice.error
    assert found("paper archive invoices", "scans")[0].endswith("scanned-notice.pdf")


@pytest.mark.django_db
def test_a_png_named_pdf_is_read_as_the_image_it_is():
    parsed, parser = parse(image_bytes(STORMS), filename="scan.pdf")
    assert isinstance(parser, ImageParser) and parsed.text == STORMS
