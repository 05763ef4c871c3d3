"""E-mail messages (``.eml``, RFC 5322) through Python's ``email`` package and ``policy.default``.

A message is a section headed by its subject: its From, To, Cc and Date lines, then its
text body (the HTML body through the app's HTML parser when it has no text part), then
any other inline text parts. A forwarded message attached whole (``message/rfc822``) is
read the same way, a section nested under the message that carries it, at most
``MAX_EMAIL_DEPTH`` deep. Other attachments are listed, not read: a last section names
each (file name, type, size), and so does the metadata, so that nothing a reader of the
message sees is lost, while a file inside a message never bypasses the limits and the
parser choice it would have as an upload of its own (upload it on its own to index it).
At most ``MAX_EMAIL_PARTS`` MIME parts are walked; the message's size is the file's.

The subject is the document's title; subject, from, to, cc and date are its metadata.
"""

from __future__ import annotations

import codecs
import email
import email.policy
from email.message import EmailMessage
from typing import Any, ClassVar

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.html import HtmlParser
from retrieval.services.parsers.layout import (
    TextBuilder,
    clip_title,
    decode_text,
    file_label,
    stem_title,
)
from retrieval.services.types import ParsedDocument

#: Header fields written at the head of a message's section, and kept in its metadata.
SHOWN_HEADERS = ("from", "to", "cc", "date")
#: Fields of which a message needs one: without any, the file is not an e-mail.
MAIL_HEADERS = ("from", "to", "subject", "date", "message-id")
NO_SUBJECT = "(no subject)"


class EmailParser(BaseParser):
    """Read an e-mail message: subject as title, headers as metadata, body as text."""

    mime_types: ClassVar[tuple[str, ...]] = ("message/rfc822",)
    extensions: ClassVar[tuple[str, ...]] = (".eml",)

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the message's body as text, a section per message, attachments listed."""
        label = file_label(filename)
        if not data.strip():
            raise ParseError(f"Cannot parse {label}: it is empty.")
        decode_text(data, filename=filename)  # refuse binary files before the parser sees them
        try:
            message = email.message_from_bytes(data, policy=email.policy.default)
        except RecursionError as e:  # MIME parts nested deeper than the email package walks
            raise ParseError(f"Cannot parse {label}: its MIME parts are nested too deeply.") from e
        if not any(_header(message, name) for name in MAIL_HEADERS):
            raise ParseError(
                f"Cannot parse {label}: it is not an e-mail message (it has none of the "
                "header fields From, To, Subject, Date or Message-ID)."
            )
        return read_message(message, label=label, filename=filename, kind="eml")


def read_message(
    message: EmailMessage, *, label: str, filename: str | None, kind: str
) -> ParsedDocument:
    """Return ``message`` as a document: a section per message, attachments listed.

    ``kind`` is the ``format`` the metadata names (``"eml"``, ``"msg"``).
    """
    reader = _MessageReader(label)
    try:
        reader.write(message, parents=(), depth=0)
    except RecursionError as e:
        raise ParseError(f"Cannot parse {label}: its MIME parts are nested too deeply.") from e
    if not reader.contents:
        broken = sorted({type(defect).__name__ for defect in message.defects})
        raise ParseError(
            f"Cannot parse {label}: it has no body text and no attachments"
            + (f" (its MIME structure is broken: {', '.join(broken)})." if broken else ".")
        )
    text, sections = reader.builder.build()
    subject = _header(message, "subject")
    metadata: dict[str, Any] = {"format": kind, "subject": subject}
    metadata.update((name, value) for name in SHOWN_HEADERS if (value := _header(message, name)))
    if iso := _iso_date(message):
        metadata["date"] = iso
    if reader.attachments:
        metadata["attachments"] = reader.attachments
    return ParsedDocument(
        text=text,
        title=clip_title(subject) or stem_title(filename),
        sections=sections,
        metadata=metadata,
    )


class _MessageReader:
    """Writes a message and the messages it carries, counting parts against the limits."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.builder = TextBuilder()
        self.attachments: list[dict[str, Any]] = []
        self.parts = 0
        self.contents = 0  # text parts written, messages and attachments found
        self.max_parts = int(retrieval_settings.MAX_EMAIL_PARTS)
        self.max_depth = int(retrieval_settings.MAX_EMAIL_DEPTH)

    def write(self, message: EmailMessage, *, parents: tuple[str, ...], depth: int) -> None:
        """Write ``message`` as a section under ``parents``, then the messages it carries."""
        heading_path = (*parents, clip_title(_header(message, "subject")) or NO_SUBJECT)
        self.builder.open_section(heading_path=heading_path)
        for name in SHOWN_HEADERS:
            if value := _header(message, name):
                self.builder.line_break()
                self.builder.write_lines(f"{name.capitalize()}: {value}")
        self.builder.block_break()
        body = message.get_body(preferencelist=("plain", "html"))
        if body is not None:
            self._write_text(body)
        carried: list[EmailMessage] = []
        listed: list[dict[str, Any]] = []
        if body is None and message.get_content_maintype() != "multipart":
            listed.append(_attachment(message, 1))  # a message that is one file, sent bare
        self._walk(message, carried, listed)
        for inner in carried:
            if depth + 1 > self.max_depth:
                raise ParseError(
                    f"Cannot parse {self.label}: it holds messages forwarded within messages "
                    f"more than {self.max_depth} deep (MAX_EMAIL_DEPTH)."
                )
            self.write(inner, parents=heading_path, depth=depth + 1)
        self.contents += len(carried) + len(listed)
        if listed:
            self.builder.open_section(heading_path=(*heading_path, "Attachments"))
            for attachment in listed:
                self.builder.line_break()
                self.builder.write_lines(
                    f"{attachment['filename']} ({attachment['content_type']}, "
                    f"{attachment['size']} bytes): not indexed; upload it as its own document."
                )
            self.attachments.extend(listed)

    def _walk(self, entity: EmailMessage, carried: list[EmailMessage], listed: list) -> None:
        """Sort the parts beside the body: inline text (written), messages, attachments."""
        for part in entity.iter_attachments():
            self.parts += 1
            if self.parts > self.max_parts:
                raise ParseError(
                    f"Cannot parse {self.label}: it has more than {self.max_parts} MIME parts "
                    "(MAX_EMAIL_PARTS)."
                )
            kind = part.get_content_type()
            if kind == "message/rfc822" and isinstance(inner := part.get_payload(0), EmailMessage):
                carried.append(inner)
            elif part.is_multipart():
                if (body := part.get_body(preferencelist=("plain", "html"))) is not None:
                    self._write_text(body)
                self._walk(part, carried, listed)
            elif _is_inline_text(part):
                self._write_text(part)
            else:
                listed.append(_attachment(part, len(listed) + 1))

    def _write_text(self, part: EmailMessage) -> None:
        """Write a text part: plain text line by line, HTML through the HTML parser."""
        text = _part_text(part)
        if part.get_content_subtype() == "html":
            try:
                text = HtmlParser().parse(codecs.BOM_UTF8 + text.encode("utf-8")).text
            except ParseError:  # markup without visible text
                return
        if text.strip():
            self.contents += 1
            self.builder.block_break()
            self.builder.write_lines(text)
            self.builder.block_break()


def _is_inline_text(part: EmailMessage) -> bool:
    """Return whether ``part`` is text shown in the message, not a file attached to it."""
    return (
        part.get_content_maintype() == "text"
        and part.get_content_subtype() in ("plain", "html")
        and part.get_content_disposition() != "attachment"
        and not part.get_filename()
    )


def _attachment(part: EmailMessage, number: int) -> dict[str, Any]:
    payload = part.get_payload(decode=True)
    return {
        "filename": clip_title(part.get_filename() or "") or f"attachment {number}",
        "content_type": part.get_content_type(),
        "size": len(payload) if isinstance(payload, bytes) else 0,
    }


def _part_text(part: EmailMessage) -> str:
    """Return a text part decoded by its charset; an unknown charset read as UTF-8 or cp1252."""
    try:
        return str(part.get_content())
    except Exception:  # an unknown charset, a damaged payload: the email package's own errors
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            return ""
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            return payload.decode("cp1252", errors="replace")


def _header(message: EmailMessage, name: str) -> str:
    """Return a header field decoded on one line, or ``""``; a malformed one as written."""
    try:
        value = message.get(name)
        text = "" if value is None else str(value)
    except Exception:  # the header parser's errors on malformed fields: keep the raw text
        text = next((str(v) for k, v in message.raw_items() if k.lower() == name), "")
    return " ".join(text.split())


def _iso_date(message: EmailMessage) -> str:
    """Return the Date field as ISO 8601, or ``""`` when it is missing or not a date."""
    try:
        moment = getattr(message.get("date"), "datetime", None)
    except Exception:
        return ""
    return moment.isoformat() if moment is not None else ""
