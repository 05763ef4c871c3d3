"""Word, PowerPoint and OpenDocument files: real files written by python-docx, python-pptx,
odfpy and pandoc, read through every face (API upload, admin upload, retrieval_ingest),
and hostile ones refused with their reason."""

from __future__ import annotations

import io
import json
import sys
from io import StringIO

import docx
import pptx
import pypandoc
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from odf import draw, table, text
from odf.dc import Creator
from odf.namespaces import PRESENTATIONNS
from odf.office import Annotation
from odf.opendocument import (
    OpenDocumentPresentation,
    OpenDocumentSpreadsheet,
    OpenDocumentText,
)
from odf.style import MasterPage, PageLayout
from pptx.util import Inches
from rest_framework.test import APIClient

from retrieval.exceptions import ParseError, ParserUnavailable, UnsupportedFileType
from retrieval.models import Chunk, Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.parsing import parser_for
from retrieval.services.parsers.opendocument import OdpParser, OdsParser, OdtParser
from retrieval.services.parsers.powerpoint import PptxParser
from retrieval.services.parsers.word import DocxParser
from retrieval.testing.parsers import ParserSuite, assert_well_formed
from tests.conftest import editor
from tests.services.parsers.test_spreadsheet import rewrite_member, zip_of

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODT = "application/vnd.oasis.opendocument.text"
ODP = "application/vnd.oasis.opendocument.presentation"
ODS = "application/vnd.oasis.opendocument.spreadsheet"


def docx_bytes() -> bytes:
    """A handbook: a title, headings two deep, lists, a table and a comment."""
    document = docx.Document()
    document.add_paragraph("Staff handbook", style="Title")
    document.add_heading("Travel", level=1)
    document.add_paragraph("Travel is booked through the office.")
    document.add_heading("Booking trains", level=2)
    booking = document.add_paragraph("Book trains two weeks ahead for the cheapest fares.")
    document.add_comment(booking.runs, text="Check this with finance", author="Ada")
    document.add_paragraph("seat reservations", style="List Bullet")
    document.add_paragraph("rail cards", style="List Bullet")
    document.add_paragraph("compare the fares", style="List Number")
    document.add_paragraph("book the ticket", style="List Number")
    table = document.add_table(rows=3, cols=2)
    for r, row in enumerate([("city", "fare"), ("Paris", "80"), ("Rome", "120")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_heading("Hotels", level=1)
    document.add_paragraph("Hotels cost under 150 a night.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def section_of(document, needle: str) -> tuple[str, ...]:
    """The heading path of the section whose text holds ``needle``."""
    for section in document.sections:
        if needle in document.text[section.start : section.end]:
            return section.heading_path
    raise AssertionError(f"{needle!r} is in no section")


class TestDocxParser(ParserSuite):
    sample = ("handbook.docx", DOCX, docx_bytes())

    def make_parser(self):
        return DocxParser()


def test_word_headings_lists_tables_and_comments_keep_their_structure():
    document = DocxParser().parse(docx_bytes(), filename="handbook.docx")
    assert_well_formed(document)
    assert document.title == "Staff handbook"
    assert section_of(document, "two weeks ahead") == ("Staff handbook", "Travel", "Booking trains")
    assert section_of(document, "under 150") == ("Staff handbook", "Hotels")
    assert (
        "fares.\n\nComment (Ada): Check this with finance\n\n"
        "- seat reservations\n- rail cards\n\n1. compare the fares\n2. book the ticket\n\n"
        "city: Paris\nfare: 80\n\ncity: Rome\nfare: 120\n\nHotels" in document.text
    )
    assert document.metadata == {"format": "docx"}


def pandoc(markdown: str, to: str, tmp_path) -> bytes:
    """``markdown`` converted by pandoc to format ``to`` (docx, odt)."""
    out = tmp_path / f"converted.{to}"
    pypandoc.convert_text(markdown, to, format="md", outputfile=str(out))
    return out.read_bytes()


def test_word_footnotes_and_nested_lists_from_pandoc(tmp_path):
    markdown = (
        "# Policies\n\n## Leave\n\nStaff get leave.[^1]\n\n- a bullet\n    - nested\n\n"
        "[^1]: Counted in working days.\n"
    )
    document = DocxParser().parse(pandoc(markdown, "docx", tmp_path), filename="p.docx")
    assert section_of(document, "Counted") == ("Policies", "Leave")
    assert "Staff get leave.[1]\n\n[1] Counted in working days." in document.text
    assert "- a bullet\n  - nested" in document.text


BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE lol [<!ENTITY lol "lol">'
    b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
)


def with_entities(data: bytes, part: str, word: bytes) -> bytes:
    """``data`` with an entity-expanding DTD in ``part``, ``word`` replaced by an entity."""
    return rewrite_member(
        data, part, lambda xml: BILLION_LAUGHS + xml.split(b"?>", 1)[1].replace(word, b"&lol3;")
    )


def zip_bomb(data: bytes, part: str) -> bytes:
    """``data`` with ``part`` padded by 16 MB of spaces (they compress about 1000 times)."""
    return rewrite_member(data, part, lambda xml: xml + b" " * (16 * 1024 * 1024))


def docx_hostile(kind: str) -> bytes:
    if kind == "billion-laughs":
        return with_entities(docx_bytes(), "word/document.xml", b"Hotels cost")
    if kind == "zip-bomb":
        return zip_bomb(docx_bytes(), "word/document.xml")
    if kind == "no-document-part":
        return zip_of({"[Content_Types].xml": b"<Types/>", "word/styles.xml": b"<styles/>"})
    return zip_of({"notes.txt": b"hello"})  # a plain zip


DOCX_REFUSALS = {
    "billion-laughs": r"declares a DTD or entities, which are refused",
    "zip-bomb": r"expands \d+ times .*MAX_ARCHIVE_RATIO",
    "no-document-part": r"not a Word document \(the zip has no word/document.xml\)",
    "plain-zip": r"not a Word document \(the zip has no word/document.xml\)",
}


@pytest.mark.parametrize("kind", list(DOCX_REFUSALS))
def test_a_hostile_or_false_docx_is_refused_with_its_reason(kind):
    with pytest.raises(ParseError, match=DOCX_REFUSALS[kind]):
        DocxParser().parse(docx_hostile(kind), filename="hostile.docx")


def test_the_time_budget_is_checked_while_a_part_is_parsed(retrieval_settings):
    # A part of many small elements takes long to parse before any block is read.
    retrieval_settings(MAX_PARSE_SECONDS=0)
    data = rewrite_member(
        docx_bytes(),
        "word/document.xml",
        lambda xml: xml.replace(b"<w:body>", b"<w:body>" + b"<w:p/>" * 20_000),
    )
    with pytest.raises(
        ParseError, match=r"MAX_PARSE_SECONDS\); stopped while reading word/document.xml"
    ):
        DocxParser().parse(data, filename="long.docx")


@pytest.mark.parametrize("kind", ["no-document-part", "plain-zip"])
def test_a_zip_named_docx_is_refused_by_its_content_before_parsing(kind):
    with pytest.raises(UnsupportedFileType, match=r"its content is a zip archive \(its name says"):
        parser_for(filename="fake.docx", mime_type=DOCX, data=docx_hostile(kind))


def test_the_archive_limits_apply_before_a_part_is_read(retrieval_settings):
    retrieval_settings(MAX_ARCHIVE_MEMBERS=3)
    with pytest.raises(ParseError, match=r"the limit is 3 \(MAX_ARCHIVE_MEMBERS\)"):
        DocxParser().parse(docx_bytes(), filename="handbook.docx")


def test_without_defusedxml_a_docx_is_unsupported_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "defusedxml", None)
    with pytest.raises(ParserUnavailable, match=r'pip install "django-retrieval\[office\]"'):
        parser_for(filename="handbook.docx")


def pptx_bytes() -> bytes:
    """A deck: a title slide, bullets with notes, a table, and a slide with no title."""
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    slide.shapes.title.text = "Quarterly review"
    slide.placeholders[1].text = "Sales and hiring"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Sales grew"
    frame = slide.placeholders[1].text_frame
    frame.text = "North up by a dozen percent"
    nested = frame.add_paragraph()
    nested.text, nested.level = "mostly rail", 1
    frame.add_paragraph().text = "South flat"
    slide.notes_slide.notes_text_frame.text = "Mention the new office in Leeds."
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Headcount"
    table = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(4), Inches(2)).table
    for r, row in enumerate([("team", "people"), ("sales", "12"), ("ops", "7")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1))
    box.text_frame.text = "Thank you"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


class TestPptxParser(ParserSuite):
    sample = ("review.pptx", PPTX, pptx_bytes())

    def make_parser(self):
        return PptxParser()


def test_a_slide_is_a_section_titled_by_its_title_with_its_notes_last():
    document = PptxParser().parse(pptx_bytes(), filename="review.pptx")
    assert_well_formed(document)
    assert document.title == "Quarterly review"
    assert [(s.heading_path, s.page) for s in document.sections] == [
        (("Quarterly review",), 1),
        (("Sales grew",), 2),
        (("Headcount",), 3),
        (("Slide 4",), 4),
    ]
    sales = document.sections[1]
    assert document.text[sales.start : sales.end] == (
        "Sales grew\n\n- North up by a dozen percent\n  - mostly rail\n- South flat\n\n"
        "Notes: Mention the new office in Leeds."
    )
    assert section_of(document, "team: ops\npeople: 7") == ("Headcount",)
    assert document.metadata == {"format": "pptx", "slides": 4}


def ten_thousand_slides() -> bytes:
    """A deck whose slide list names 10,000 slides (all the first one's part)."""

    def repeat(xml: bytes) -> bytes:
        head, rest = xml.split(b"<p:sldId ", 1)
        entry = b"<p:sldId " + rest.split(b"/>", 1)[0] + b"/>"
        tail = rest.split(b"</p:sldIdLst>", 1)[1]
        return head + entry * 10_000 + b"</p:sldIdLst>" + tail

    return rewrite_member(pptx_bytes(), "ppt/presentation.xml", repeat)


def test_a_deck_of_ten_thousand_slides_is_refused_before_a_slide_is_read():
    with pytest.raises(ParseError, match=r"10000 slides; the limit is 1000 \(MAX_SLIDES\)"):
        PptxParser().parse(ten_thousand_slides(), filename="huge.pptx")


def test_max_slides_is_a_setting(retrieval_settings):
    retrieval_settings(MAX_SLIDES=3)
    with pytest.raises(ParseError, match=r"4 slides; the limit is 3 \(MAX_SLIDES\)"):
        PptxParser().parse(pptx_bytes(), filename="review.pptx")


def test_entities_in_a_slide_are_refused():
    data = with_entities(pptx_bytes(), "ppt/slides/slide2.xml", b"South flat")
    with pytest.raises(ParseError, match=r"declares a DTD or entities, which are refused"):
        PptxParser().parse(data, filename="bomb.pptx")


def odf_bytes(document) -> bytes:
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def odf_table(name: str, rows, *, trailing: bool = False) -> table.Table:
    """A table of ``rows``; with ``trailing``, the unused rest of a sheet as an office
    suite writes it (1,000 empty cells a row, a million empty rows)."""
    sheet = table.Table(name=name)
    for row in rows:
        element = table.TableRow()
        for value in row:
            cell = table.TableCell()
            cell.addElement(text.P(text=value))
            element.addElement(cell)
        if trailing:
            element.addElement(table.TableCell(numbercolumnsrepeated=1000))
        sheet.addElement(element)
    if trailing:
        rest = table.TableRow(numberrowsrepeated=1_048_000)
        rest.addElement(table.TableCell(numbercolumnsrepeated=1024))
        sheet.addElement(rest)
    return sheet


def odt_bytes() -> bytes:
    """The handbook of docx_bytes, as an OpenDocument text (a footnote for the comment)."""
    document = OpenDocumentText()
    numbers = text.ListStyle(name="Numbers")
    numbers.addElement(text.ListLevelStyleNumber(level=1, numformat="1"))
    document.automaticstyles.addElement(numbers)
    document.text.addElement(text.H(outlinelevel=1, text="Travel"))
    document.text.addElement(text.P(text="Travel is booked through the office."))
    document.text.addElement(text.H(outlinelevel=2, text="Booking trains"))
    booking = text.P(text="Book trains two weeks ahead.")
    note = text.Note(noteclass="footnote", id="n1")
    note.addElement(text.NoteCitation(text="1"))
    body = text.NoteBody()
    body.addElement(text.P(text="Fares rise after that."))
    note.addElement(body)
    booking.addElement(note)
    comment = Annotation()
    comment.addElement(Creator(text="Ada"))
    comment.addElement(text.P(text="Check this with finance"))
    booking.addElement(comment)
    document.text.addElement(booking)
    for style, items in (
        (None, ("seat reservations", "rail cards")),
        (numbers, ("compare", "book")),
    ):
        items_list = text.List(stylename=style) if style else text.List()
        for item_text in items:
            item = text.ListItem()
            item.addElement(text.P(text=item_text))
            items_list.addElement(item)
        document.text.addElement(items_list)
    document.text.addElement(odf_table("Fares", [("city", "fare"), ("Paris", "80")]))
    document.text.addElement(text.H(outlinelevel=1, text="Hotels"))
    document.text.addElement(text.P(text="Hotels cost under 150 a night."))
    return odf_bytes(document)


def odp_bytes(slides=None) -> bytes:
    """A deck: titled pages with an outline, and a page with no title."""
    deck = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    deck.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    deck.masterstyles.addElement(master)
    slides = slides or [
        ("Quarterly review", ["Sales and hiring"]),
        ("Sales grew", ["North up by a dozen percent", "South flat"]),
        (None, ["Thank you"]),
    ]
    for number, (title, lines) in enumerate(slides, start=1):
        page = draw.Page(name=f"page{number}", masterpagename=master)
        for kind, paragraphs in (("title", [title] if title else []), ("outline", lines)):
            if not paragraphs:
                continue
            frame = draw.Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            frame.setAttrNS(PRESENTATIONNS, "class", kind)
            box = draw.TextBox()
            for line in paragraphs:
                box.addElement(text.P(text=line))
            frame.addElement(box)
            page.addElement(frame)
        deck.presentation.addElement(page)
    return odf_bytes(deck)


PEOPLE = [("name", "city"), ("Ada", "Paris"), ("Bob", "Rome")]


def ods_bytes(sheets=None, *, trailing: bool = True) -> bytes:
    book = OpenDocumentSpreadsheet()
    for name, rows in (
        sheets or {"People": PEOPLE, "Prices": [("item", "price"), ("pen", "1.5")]}
    ).items():
        book.spreadsheet.addElement(odf_table(name, rows, trailing=trailing))
    return odf_bytes(book)


class TestOdtParser(ParserSuite):
    sample = ("handbook.odt", ODT, odt_bytes())

    def make_parser(self):
        return OdtParser()


class TestOdpParser(ParserSuite):
    sample = ("review.odp", ODP, odp_bytes())

    def make_parser(self):
        return OdpParser()


class TestOdsParser(ParserSuite):
    sample = ("book.ods", ODS, ods_bytes())

    def make_parser(self):
        return OdsParser()


def test_an_opendocument_text_keeps_headings_lists_tables_notes_and_comments():
    document = OdtParser().parse(odt_bytes(), filename="handbook.odt")
    assert_well_formed(document)
    assert section_of(document, "two weeks") == ("Travel", "Booking trains")
    assert section_of(document, "under 150") == ("Hotels",)
    assert (
        "Book trains two weeks ahead.[1]\n\n[1] Fares rise after that.\n"
        "Comment (Ada): Check this with finance\n\n- seat reservations\n- rail cards\n\n"
        "1. compare\n2. book\n\ncity: Paris\nfare: 80\n\nHotels" in document.text
    )


def test_an_opendocument_text_from_pandoc_keeps_nested_lists(tmp_path):
    markdown = "# Policies\n\n## Leave\n\n- a bullet\n    - nested\n\n1. first\n2. second\n"
    document = OdtParser().parse(pandoc(markdown, "odt", tmp_path), filename="p.odt")
    assert section_of(document, "nested") == ("Policies", "Leave")
    assert "- a bullet\n  - nested\n\n1. first\n2. second" in document.text


def test_an_opendocument_presentation_is_a_section_per_slide():
    document = OdpParser().parse(odp_bytes(), filename="review.odp")
    assert [(s.heading_path, s.page) for s in document.sections] == [
        (("Quarterly review",), 1),
        (("Sales grew",), 2),
        (("Slide 3",), 3),
    ]
    assert document.title == "Quarterly review"
    assert section_of(document, "South flat") == ("Sales grew",)


def test_an_opendocument_spreadsheet_is_a_section_per_sheet_its_unused_rest_unread():
    # Each sheet ends as office suites write it: a million empty rows of 1024 cells.
    document = OdsParser().parse(ods_bytes(), filename="book.ods")
    assert [s.heading_path for s in document.sections] == [("People",), ("Prices",)]
    assert document.text == (
        "name: Ada\ncity: Paris\n\nname: Bob\ncity: Rome\n\nitem: pen\nprice: 1.5"
    )
    assert document.metadata == {"format": "ods", "sheets": 2}


def repeated(data: bytes, attribute: bytes, count: int) -> bytes:
    """``data`` whose first row (or cell) with a value repeats ``count`` times."""

    def edit(xml: bytes) -> bytes:
        tag = b"<table:table-row" if attribute == b"rows" else b"<table:table-cell"
        return xml.replace(
            tag,
            tag
            + b' table:number-%s-repeated="%d"'
            % (b"rows" if attribute == b"rows" else b"columns", count),
            1,
        )

    return rewrite_member(data, "content.xml", edit)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (lambda: repeated(ods_bytes(trailing=False), b"rows", 10**9), r"more than 1000000 cells"),
        (lambda: repeated(ods_bytes(trailing=False), b"cells", 10**9), r"a row has more than"),
        (lambda: with_entities(ods_bytes(), "content.xml", b"Paris"), "DTD or entities"),
        (lambda: zip_bomb(ods_bytes(trailing=False), "content.xml"), "MAX_ARCHIVE_RATIO"),
    ],
    ids=["repeated-rows", "repeated-cells", "billion-laughs", "zip-bomb"],
)
def test_a_hostile_opendocument_file_is_refused_with_its_reason(data, reason):
    with pytest.raises(ParseError, match=reason):
        OdsParser().parse(data(), filename="hostile.ods")


@pytest.mark.parametrize(
    ("name", "make", "parser"),
    [("notes.docx", odt_bytes, OdtParser), ("deck.odp", pptx_bytes, PptxParser)],
)
def test_the_bytes_choose_the_parser_whatever_the_name_says(name, make, parser):
    assert isinstance(parser_for(filename=name, data=make()), parser)


def test_opendocument_sheets_and_slides_are_bounded(retrieval_settings):
    retrieval_settings(MAX_SHEETS=1, MAX_SLIDES=2)
    with pytest.raises(ParseError, match=r"2 sheets; the limit is 1 \(MAX_SHEETS\)"):
        OdsParser().parse(ods_bytes(), filename="book.ods")
    with pytest.raises(ParseError, match=r"3 slides; the limit is 2 \(MAX_SLIDES\)"):
        OdpParser().parse(odp_bytes(), filename="review.odp")


# The faces: API multipart upload, admin upload, retrieval_ingest on a folder.

pytest_db = pytest.mark.django_db

#: Each sample, its MIME type, and a phrase of it with the heading path of its chunk.
FACES = {
    "handbook.docx": (
        docx_bytes,
        DOCX,
        "two weeks",
        ["Staff handbook", "Travel", "Booking trains"],
    ),
    "review.pptx": (pptx_bytes, PPTX, "Leeds", ["Sales grew"]),
    "handbook.odt": (odt_bytes, ODT, "two weeks", ["Travel", "Booking trains"]),
    "review.odp": (odp_bytes, ODP, "South flat", ["Sales grew"]),
    "book.ods": (ods_bytes, ODS, "city: Rome", ["People"]),
}


def assert_structure_indexed(collection_slug: str) -> None:
    """Every sample is indexed, and the chunk holding its phrase has its heading path."""
    for name, (_, _, phrase, path) in FACES.items():
        document = Document.objects.get(
            collection__slug=collection_slug, external_id__endswith=name
        )
        assert document.status == Document.Status.INDEXED, (name, document.error)
        chunk = document.chunks.get(content__contains=phrase)
        assert chunk.heading_path == path, (name, chunk.content)


def uploads() -> list[SimpleUploadedFile]:
    return [SimpleUploadedFile(name, make(), kind) for name, (make, kind, *_) in FACES.items()]


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("reader"))
    get_or_create_collection("Office")
    return client


def post(api: APIClient, upload: SimpleUploadedFile):
    return api.post("/api/documents/", {"collection": "office", "file": upload})


@pytest_db
def test_the_api_indexes_word_powerpoint_and_opendocument_files(api):
    for upload in uploads():
        response = post(api, upload)
        assert response.status_code == 201, response.json()
    assert_structure_indexed("office")


@pytest_db
def test_the_api_answers_415_naming_the_extra_without_defusedxml(api, monkeypatch):
    monkeypatch.setitem(sys.modules, "defusedxml", None)
    for upload in uploads():
        response = post(api, upload)
        assert response.status_code == 415, upload.name
        assert 'pip install "django-retrieval[office]"' in response.json()["detail"]
    assert not Document.objects.exists()


HOSTILE = {
    "billion-laughs": (lambda: docx_hostile("billion-laughs"), DOCX, 400),
    "zip-bomb": (lambda: docx_hostile("zip-bomb"), DOCX, 400),
    "ten-thousand-slides": (ten_thousand_slides, PPTX, 400),
    "no-document-part": (lambda: docx_hostile("no-document-part"), DOCX, 415),
}


@pytest_db
@pytest.mark.parametrize("kind", list(HOSTILE))
def test_the_api_refuses_a_hostile_file_with_its_reason_storing_nothing(api, kind):
    make, mime_type, status = HOSTILE[kind]
    name = "hostile.pptx" if mime_type == PPTX else "hostile.docx"
    response = post(api, SimpleUploadedFile(name, make(), mime_type))
    assert response.status_code == status
    reason = {
        "billion-laughs": "declares a DTD or entities, which are refused",
        "zip-bomb": "(MAX_ARCHIVE_RATIO)",
        "ten-thousand-slides": "10000 slides; the limit is 1000 (MAX_SLIDES)",
        "no-document-part": "its content is a zip archive (its name says .docx)",
    }[kind]
    assert reason in str(response.json())
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest_db
def test_the_admin_upload_indexes_word_powerpoint_and_opendocument_files(
    admin_client, keyword_settings
):
    collection, _ = get_or_create_collection("Office")
    response = admin_client.post(
        reverse("admin:retrieval_document_add"), {"collection": collection.pk, "files": uploads()}
    )
    assert response.status_code == 302
    assert_structure_indexed("office")


@pytest_db
def test_the_admin_upload_names_the_extra_without_defusedxml(admin_client, monkeypatch):
    collection, _ = get_or_create_collection("Office")
    monkeypatch.setitem(sys.modules, "defusedxml", None)
    response = admin_client.post(
        reverse("admin:retrieval_document_add"),
        {"collection": collection.pk, "files": uploads()[:1]},
    )
    assert response.status_code == 200  # the form again, with the error
    assert "pip install &quot;django-retrieval[office]&quot;" in response.content.decode()
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_indexes_a_folder_of_office_files(keyword_settings, tmp_path):
    folder = tmp_path / "office"
    folder.mkdir()
    for name, (make, *_) in FACES.items():
        (folder / name).write_bytes(make())
    (folder / "fake.docx").write_bytes(docx_hostile("plain-zip"))
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 6 documents failed"):
        call_command("retrieval_ingest", str(folder), collection="Office", stdout=out)
    assert_structure_indexed("office")
    assert (
        "failed   office/fake.docx: Cannot read fake.docx: its content is a zip" in out.getvalue()
    )


@pytest.mark.django_db(transaction=True)
def test_the_demo_office_samples_are_indexed_and_found(keyword_settings, tmp_path):
    from project.sample_office import write_samples

    folder = tmp_path / "office-samples"
    write_samples(folder)
    call_command("retrieval_ingest", str(folder), collection="Handbook", stdout=StringIO())
    expected = {
        "chapter": (
            "office-guide.docx",
            [
                "Office documents in django-retrieval",
                "Uploading office files",
                "What becomes structure",
            ],
        ),
        "reranker": ("quality-review.pptx", ["Hybrid search wins"]),
        "slides": ("limits.xlsx", ["File limits"]),
    }
    for query, (name, path) in expected.items():
        out = StringIO()
        call_command(
            "retrieval_search",
            query,
            collection="Handbook",
            retriever="bm25",
            top_k=1,
            json=True,
            stdout=out,
        )
        top = json.loads(out.getvalue())["results"][0]
        assert top["document"] == f"office-samples/{name}", query
        chunk = Chunk.objects.get(document__external_id=top["document"], index=top["chunk_index"])
        assert chunk.heading_path == path


def test_a_table_nested_in_a_word_cell_is_read_once_as_that_cell_s_text():
    document = docx.Document()
    outer = document.add_table(rows=2, cols=2)
    outer.cell(0, 0).text, outer.cell(0, 1).text = "team", "members"
    outer.cell(1, 0).text = "sales"
    inner = outer.cell(1, 1).add_table(rows=1, cols=2)
    inner.cell(0, 0).text, inner.cell(0, 1).text = "Ada", "Bob"
    out = io.BytesIO()
    document.save(out)
    text = DocxParser().parse(out.getvalue(), filename="nested.docx").text
    assert text == "team: sales\nmembers: Ada Bob"
