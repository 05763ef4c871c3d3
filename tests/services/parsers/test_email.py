"""E-mail: real messages written by the stdlib's ``email`` package (.eml) and Outlook messages
laid out as [MS-OXMSG] describes by the tests' compound-file writer (.msg), read through every
face (API upload, admin upload, retrieval_ingest); malformed or hostile messages, and OLE2 files
that are not messages, refused with a reason."""

from __future__ import annotations

import email.policy
import struct
import sys
from email.message import EmailMessage
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from retrieval.exceptions import ParseError, ParserUnavailable
from retrieval.models import Chunk, Document
from retrieval.services.ingestion.parsing import parser_for
from retrieval.services.parsers.email import EmailParser
from retrieval.services.parsers.outlook import OutlookMsgParser
from retrieval.testing.parsers import ParserSuite, assert_well_formed
from tests.services.parsers.compound import compound_file
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


# Outlook messages (.msg).

MSG = "application/vnd.ms-outlook"
#: 2026-03-03 09:15 UTC as a FILETIME (100 ns steps since 1601).
SENT = (1772529300 + 11644473600) * 10**7


def utf16(text: str) -> bytes:
    return text.encode("utf-16-le")


def properties(header: int, **times: int) -> bytes:
    """A properties stream: ``header`` reserved bytes, then 16-byte PT_SYSTIME entries."""
    tags = {"sent": 0x00390040, "received": 0x0E060040}
    return b"\0" * header + b"".join(
        struct.pack("<IIQ", tags[name], 6, value) for name, value in times.items()
    )


def attached_file(name: str, kind: str, data: bytes) -> dict:
    return {
        "__properties_version1.0": properties(8),
        "__substg1.0_3707001F": utf16(name),
        "__substg1.0_370E001F": utf16(kind),
        "__substg1.0_37010102": data,
    }


def attached_message(message: dict) -> dict:
    return {"__properties_version1.0": properties(8), "__substg1.0_3701000D": message}


def message_tree(subject: str, body: str, *attachments: dict, header: int = 32, **extra) -> dict:
    tree = {
        "__properties_version1.0": properties(header, **extra.pop("times", {})),
        "__substg1.0_0037001F": utf16(subject),
        "__substg1.0_1000001F": utf16(body),
        **extra,
    }
    for number, attachment in enumerate(attachments):
        tree[f"__attach_version1.0_#{number:08X}"] = attachment
    return tree


def order_tree() -> dict:
    """Ada's order, as Outlook stores it: a PDF and a forwarded message attached."""
    return message_tree(
        "Quarterly tea order",
        "Please order green tea.\r\n\r\nTwo kilos, loose leaf.",
        attached_file("bill.pdf", "application/pdf", b"%PDF-1.4 x"),
        attached_message(message_tree("Supplier prices", "Sencha costs 40 a kilo.", header=24)),
        times={"sent": SENT},
        **{
            "__substg1.0_0C1A001F": utf16("Ada Lovelace"),
            "__substg1.0_5D01001F": utf16("ada@example.org"),
            "__substg1.0_0E04001F": utf16("Charles Babbage; Grace Hopper"),
        },
    )


def order_msg() -> bytes:
    return compound_file(order_tree())


class TestOutlookMsgParser(ParserSuite):
    sample = ("order.msg", MSG, order_msg())

    def make_parser(self):
        return OutlookMsgParser()


def test_a_message_is_read_as_its_eml_would_be():
    document = OutlookMsgParser().parse(order_msg(), filename="order.msg")
    assert_well_formed(document)
    assert document.title == "Quarterly tea order"
    assert document.metadata == {
        "format": "msg",
        "subject": "Quarterly tea order",
        "from": "Ada Lovelace <ada@example.org>",
        "to": '"Charles Babbage", "Grace Hopper"',
        "date": "2026-03-03T09:15:00+00:00",
        "attachments": [{"filename": "bill.pdf", "content_type": "application/pdf", "size": 10}],
    }
    sections = {s.heading_path: document.text[s.start : s.end] for s in document.sections}
    assert sections == {
        ("Quarterly tea order",): (
            'From: Ada Lovelace <ada@example.org>\nTo: "Charles Babbage", "Grace Hopper"\n'
            "Date: Tue, 03 Mar 2026 09:15:00 +0000\n\n"
            "Please order green tea.\n\nTwo kilos, loose leaf."
        ),
        ("Quarterly tea order", "Supplier prices"): "Sencha costs 40 a kilo.",
        ("Quarterly tea order", "Attachments"): (
            "bill.pdf (application/pdf, 10 bytes): not indexed; upload it as its own document."
        ),
    }


def test_an_html_body_is_read_when_there_is_no_text_body():
    tree = message_tree("News", "")
    del tree["__substg1.0_1000001F"]
    tree["__substg1.0_10130102"] = b"<h1>News</h1><script>x()</script><p>Tea is up.</p>"
    document = OutlookMsgParser().parse(compound_file(tree))
    assert document.text == "News\n\nTea is up."


def test_a_message_without_a_body_is_read_for_what_it_carries():
    # A message attached with no body had a text part without payload, which the email
    # package's get_content() fails on (AttributeError).
    empty = message_tree("Meeting", "", header=24)
    del empty["__substg1.0_1000001F"]
    tree = message_tree("Invitation", "See the meeting.", attached_message(empty))
    document = OutlookMsgParser().parse(compound_file(tree))
    assert document.text == "See the meeting."


def deeply_forwarded(depth: int) -> bytes:
    tree = message_tree("level 0", "the innermost", header=24)
    for level in range(1, depth + 1):
        tree = message_tree(f"level {level}", "carrying one", attached_message(tree), header=24)
    return compound_file(tree)


def stream_longer_than_the_file() -> bytes:
    data = bytearray(compound_file(message_tree("Big", "x" * 5000)))
    entry = data.index(utf16("__substg1.0_1000001F"))
    struct.pack_into("<Q", data, entry + 120, 10**9)
    return bytes(data)


MSG_HOSTILE = [
    (compound_file({"WordDocument": b"x" * 100}), r"an OLE2 compound file but not an Outlook"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, r"not a readable compound file"),
    (deeply_forwarded(6), r"messages more than 5 deep \(MAX_EMAIL_DEPTH\)"),
    (
        compound_file(
            message_tree("Photos", "See.", *[attached_file("p.png", "image/png", b"x")] * 101)
        ),
        r"more than 100 attachments \(MAX_EMAIL_PARTS\)",
    ),
    (stream_longer_than_the_file(), r"not a readable compound file|more bytes than the file"),
]
MSG_HOSTILE_IDS = ["word-97", "truncated", "deep", "attachments", "stream-size"]


@pytest.mark.parametrize(("data", "reason"), MSG_HOSTILE, ids=MSG_HOSTILE_IDS)
def test_another_ole2_file_or_a_broken_message_is_refused_with_a_reason(data, reason):
    with pytest.raises(ParseError, match=reason):
        OutlookMsgParser().parse(data, filename="bad.msg")


def test_the_bytes_choose_the_outlook_parser_and_it_refuses_other_ole2_files():
    assert isinstance(parser_for(filename="order.bin", data=order_msg()), OutlookMsgParser)
    word = parser_for(filename="old.doc", data=MSG_HOSTILE[0][0])
    with pytest.raises(ParseError, match=r"save it in a current format \(.docx, .xlsx, .pptx\)"):
        word.parse(MSG_HOSTILE[0][0], filename="old.doc")


def test_without_olefile_a_msg_is_unsupported_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "olefile", None)
    with pytest.raises(ParserUnavailable, match=r'pip install "django-retrieval\[email\]"'):
        parser_for(filename="order.msg", data=order_msg())


# The faces: API multipart upload, admin upload, retrieval_ingest on a folder.

pytest_db = pytest.mark.django_db
#: The same message as each format stores it: (file name, MIME type, bytes).
ORDERS = [("order.eml", EML, as_bytes(order())), ("order.msg", MSG, order_msg())]
ORDER_IDS = ["eml", "msg"]


def assert_message_indexed(collection_slug: str, name: str) -> None:
    """The message's subject is its title and in its metadata; its chunks carry it as heading."""
    mail = Document.objects.get(collection__slug=collection_slug, external_id__endswith=name)
    assert mail.status == Document.Status.INDEXED, mail.error
    assert mail.title == mail.metadata["subject"] == "Quarterly tea order"
    assert mail.metadata["from"] == "Ada Lovelace <ada@example.org>"
    assert mail.metadata["format"] == name.rsplit(".", 1)[1]
    chunks = list(mail.chunks.order_by("index"))
    assert all(chunk.heading_path[0] == "Quarterly tea order" for chunk in chunks)
    assert any("Sencha" in c.content and c.heading_path[-1] == "Supplier prices" for c in chunks)


@pytest.fixture
def api(keyword_settings) -> APIClient:
    return api_client("Mail")


@pytest_db
@pytest.mark.parametrize(("name", "kind", "data"), ORDERS, ids=ORDER_IDS)
def test_the_api_indexes_a_message(api, name, kind, data):
    response = post_to_api(api, "mail", name, data, kind)
    assert response.status_code == 201, response.json()
    assert_message_indexed("mail", name)


@pytest_db
@pytest.mark.parametrize(("data", "reason"), MALFORMED[:3], ids=MALFORMED_IDS[:3])
def test_the_api_refuses_a_malformed_message_storing_nothing(api, data, reason):
    response = post_to_api(api, "mail", "bad.eml", data, EML)
    assert response.status_code == 400, response.json()
    assert "bad.eml" in str(response.json())
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest_db
def test_the_api_refuses_a_word_97_file_named_msg_storing_nothing(api):
    response = post_to_api(api, "mail", "order.msg", MSG_HOSTILE[0][0], MSG)
    assert response.status_code == 400, response.json()
    assert "not an Outlook message" in str(response.json())
    assert not Document.objects.exists() and not Chunk.objects.exists()


@pytest_db
def test_the_api_answers_415_naming_the_extra_without_olefile(api, monkeypatch):
    monkeypatch.setitem(sys.modules, "olefile", None)
    response = post_to_api(api, "mail", "order.msg", order_msg(), MSG)
    assert response.status_code == 415
    assert 'pip install "django-retrieval[email]"' in response.json()["detail"]
    assert not Document.objects.exists()


@pytest_db
@pytest.mark.parametrize(("name", "kind", "data"), ORDERS, ids=ORDER_IDS)
def test_the_admin_upload_indexes_a_message(admin_client, keyword_settings, name, kind, data):
    response = post_to_admin(admin_client, "Mail", name, data, kind)
    assert response.status_code == 200
    assert_message_indexed("mail", name)


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_indexes_a_folder_of_messages(keyword_settings, tmp_path):
    folder = tmp_path / "mail"
    folder.mkdir()
    for name, _, data in ORDERS:
        (folder / name).write_bytes(data)
    (folder / "letter.eml").write_bytes(MALFORMED[0][0])
    (folder / "old.msg").write_bytes(MSG_HOSTILE[0][0])
    out = StringIO()
    with pytest.raises(CommandError, match="2 of 4 documents failed"):
        call_command("retrieval_ingest", str(folder), collection="Mail", stdout=out)
    assert "letter.eml" in out.getvalue() and "not an e-mail message" in out.getvalue()
    assert "old.msg" in out.getvalue() and "not an Outlook message" in out.getvalue()
    for name, _, _ in ORDERS:
        assert_message_indexed("mail", name)
    for name in ("letter.eml", "old.msg"):
        failed = Document.objects.get(external_id__endswith=name)
        assert failed.status == Document.Status.FAILED and not failed.chunks.exists()
