"""E-mail: real messages written by the stdlib's ``email`` package, read through every face (API
upload, admin upload, retrieval_ingest), and malformed or hostile messages refused."""

from __future__ import annotations

import email.policy
from email.message import EmailMessage
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from retrieval.exceptions import ParseError
from retrieval.models import Chunk, Document
from retrieval.services.parsers.email import EmailParser
from retrieval.testing.parsers import ParserSuite, assert_well_formed
from tests.services.parsers.uploads import api_client, post_to_admin, post_to_api

EML = "message/rfc822"


def message(subject: str, body: str, **headers: str) -> EmailMessage:
    mail = EmailMessage()
    mail["Subject"] = subject
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    mail.set_content(body)
    return mail


def order() -> EmailMessage:
    """A message with text and HTML bodies, a PDF attached and a forwarded message."""
    mail = message(
        "Quarterly tea order",
        "Please order green tea.\n\nTwo kilos, loose leaf.",
        From="Ada Lovelace <ada@example.org>",
        To="Charles <charles@example.org>, grace@example.org",
        Date="Tue, 03 Mar 2026 10:15:00 +0100",
    )
    mail.add_alternative("<p>Please order <b>green</b> tea.</p>", subtype="html")
    mail.add_attachment(b"%PDF-1.4 x", maintype="application", subtype="pdf", filename="bill.pdf")
    mail.add_attachment(message("Supplier prices", "Sencha costs 40 a kilo.", From="shop@x.com"))
    return mail


def as_bytes(mail: EmailMessage) -> bytes:
    return mail.as_bytes(policy=email.policy.SMTP)


class TestEmailParser(ParserSuite):
    sample = ("order.eml", EML, as_bytes(order()))

    def make_parser(self):
        return EmailParser()


def test_a_message_is_its_subject_headers_body_forwarded_messages_and_attachments():
    document = EmailParser().parse(as_bytes(order()), filename="order.eml")
    assert_well_formed(document)
    assert document.title == "Quarterly tea order"
    assert document.metadata == {
        "format": "eml",
        "subject": "Quarterly tea order",
        "from": "Ada Lovelace <ada@example.org>",
        "to": "Charles <charles@example.org>, grace@example.org",
        "date": "2026-03-03T10:15:00+01:00",
        "attachments": [{"filename": "bill.pdf", "content_type": "application/pdf", "size": 10}],
    }
    sections = {s.heading_path: document.text[s.start : s.end] for s in document.sections}
    assert sections == {
        ("Quarterly tea order",): (
            "From: Ada Lovelace <ada@example.org>\n"
            "To: Charles <charles@example.org>, grace@example.org\n"
            "Date: Tue, 03 Mar 2026 10:15:00 +0100\n\n"
            "Please order green tea.\n\nTwo kilos, loose leaf."  # the text body, not the HTML
        ),
        ("Quarterly tea order", "Supplier prices"): "From: shop@x.com\n\nSencha costs 40 a kilo.",
        ("Quarterly tea order", "Attachments"): (
            "bill.pdf (application/pdf, 10 bytes): not indexed; upload it as its own document."
        ),
    }


def test_without_a_text_part_the_html_body_is_read_as_html():
    mail = EmailMessage()
    mail["Subject"] = "Newsletter"
    mail.set_content(
        "<html><head><script>track()</script></head><body><h1>News</h1><p>Tea is up.</p></body>",
        subtype="html",
    )
    document = EmailParser().parse(as_bytes(mail))
    assert document.text == "News\n\nTea is up."


def test_inline_text_parts_are_read_and_unknown_charsets_decoded():
    mail = message("Minutes", "First part.")
    mail.make_mixed()
    footer = EmailMessage()
    footer.set_content("Caf\u00e9 list footer.".encode(), maintype="text", subtype="plain")
    footer.replace_header("Content-Type", 'text/plain; charset="x-unknown"')
    mail.attach(footer)
    document = EmailParser().parse(as_bytes(mail))
    assert document.text == "First part.\n\nCaf\u00e9 list footer."
    assert "attachments" not in document.metadata


def nested(depth: int) -> bytes:
    mail = message("level 0", "the innermost")
    for level in range(1, depth + 1):
        outer = message(f"level {level}", "carrying one")
        outer.add_attachment(mail)
        mail = outer
    return as_bytes(mail)


def deep_mime() -> bytes:
    """MIME parts nested 3000 deep: past what Python's email package recurses through."""
    boundaries = b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n" % (i, i) for i in range(3000)
    )
    head = b"From: a@example.org\nSubject: deep\n"
    return head + boundaries + b"Content-Type: text/plain\n\nhi\n"


def many_attachments() -> bytes:
    mail = message("Photos", "See attached.")
    for number in range(101):
        mail.add_attachment(b"x", maintype="image", subtype="png", filename=f"p{number}.png")
    return as_bytes(mail)


MALFORMED = [
    (b"Dear Ada,\n\nno headers at all: just a letter.\n", r"not an e-mail message"),
    (b"From: a@b.c\n\x00\x01\x02\x03binary", r"looks like a binary file"),
    (
        b"From: a@example.org\nSubject: broken\nContent-Type: multipart/mixed; boundary=XYZ\n\n"
        b"no boundary here\n",
        r"no body text and no attachments \(its MIME structure is broken: "
        r"MultipartInvariantViolationDefect, StartBoundaryNotFoundDefect\)",
    ),
    (nested(6), r"messages forwarded within messages more than 5 deep \(MAX_EMAIL_DEPTH\)"),
    (deep_mime(), r"its MIME parts are nested too deeply"),
    (many_attachments(), r"more than 100 MIME parts \(MAX_EMAIL_PARTS\)"),
]
MALFORMED_IDS = ["no-headers", "binary", "no-boundary", "deep-messages", "deep-mime", "parts"]


@pytest.mark.parametrize(("data", "reason"), MALFORMED, ids=MALFORMED_IDS)
def test_a_malformed_or_hostile_message_is_refused_with_a_reason(data, reason):
    with pytest.raises(ParseError, match=reason):
        EmailParser().parse(data, filename="bad.eml")


def test_forwarded_messages_nest_their_headings_up_to_the_limit():
    document = EmailParser().parse(nested(5))
    deepest = document.sections[-1]
    assert deepest.heading_path == tuple(f"level {n}" for n in range(5, -1, -1))
    assert document.text[deepest.start : deepest.end] == "the innermost"


# The faces: API multipart upload, admin upload, retrieval_ingest on a folder.

pytest_db = pytest.mark.django_db


def assert_message_indexed(collection_slug: str) -> None:
    """The message's subject is its title and in its metadata; its chunks carry it as heading."""
    mail = Document.objects.get(collection__slug=collection_slug, external_id__endswith="order.eml")
    assert mail.status == Document.Status.INDEXED, mail.error
    assert mail.title == mail.metadata["subject"] == "Quarterly tea order"
    assert mail.metadata["from"] == "Ada Lovelace <ada@example.org>"
    chunks = list(mail.chunks.order_by("index"))
    assert all(chunk.heading_path[0] == "Quarterly tea order" for chunk in chunks)
    assert any("Sencha" in c.content and c.heading_path[-1] == "Supplier prices" for c in chunks)


@pytest.fixture
def api(keyword_settings) -> APIClient:
    return api_client("Mail")


@pytest_db
def test_the_api_indexes_a_message(api):
    response = post_to_api(api, "mail", "order.eml", as_bytes(order()), EML)
    assert response.status_code == 201, response.json()
    assert_message_indexed("mail")


@pytest_db
@pytest.mark.parametrize(("data", "reason"), MALFORMED[:3], ids=MALFORMED_IDS[:3])
def test_the_api_refuses_a_malformed_message_storing_nothing(api, data, reason):
    response = post_to_api(api, "mail", "bad.eml", data, EML)
    assert response.status_code == 400, response.json()
    assert "bad.eml" in str(response.json())
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest_db
def test_an_outlook_msg_file_is_a_415_naming_what_it_is(api):
    data = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504  # an OLE2 signature
    response = post_to_api(api, "mail", "order.msg", data, "application/vnd.ms-outlook")
    assert response.status_code == 415
    # Outlook messages are not read (see docs/guides/formats.md): the refusal lists .eml.
    assert "No parser accepts order.msg" in response.json()["detail"]
    assert ".eml" in response.json()["detail"]
    assert not Document.objects.exists()


@pytest_db
def test_the_admin_upload_indexes_a_message(admin_client, keyword_settings):
    response = post_to_admin(admin_client, "Mail", "order.eml", as_bytes(order()), EML)
    assert response.status_code == 200
    assert_message_indexed("mail")


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_indexes_a_folder_of_messages(keyword_settings, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    (folder / "order.eml").write_bytes(as_bytes(order()))
    (folder / "letter.eml").write_bytes(MALFORMED[0][0])
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 2 documents failed"):
        call_command("retrieval_ingest", str(folder), collection="Mail", stdout=out)
    assert "letter.eml" in out.getvalue() and "not an e-mail message" in out.getvalue()
    assert_message_indexed("mail")
    letter = Document.objects.get(external_id__endswith="letter.eml")
    assert letter.status == Document.Status.FAILED and not letter.chunks.exists()
