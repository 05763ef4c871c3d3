"""Outlook messages (``.msg``): [MS-OXMSG] properties in an OLE2 compound file, through olefile.

The message's properties (subject, sender, display To and Cc, body or HTML body, dates)
and its attachments (files, and messages embedded whole) are read into an e-mail message,
then written as an ``.eml`` file is (:func:`~retrieval.services.parsers.email.read_message`):
the same sections, metadata, listed attachments and limits (``MAX_EMAIL_PARTS``,
``MAX_EMAIL_DEPTH``). olefile (BSD) reads the compound file; extract-msg, the fuller
reader, is GPL-3.0, which an MIT app cannot ask its users to take on.

Word, Excel and PowerPoint 97-2003 files are OLE2 compound files too: this parser reads
what the bytes say is one, checks for a message's streams, and refuses the others naming
what to do. olefile is opened raising on any incorrect structure (a sector chain that
loops, a stream declared longer than its chain), and no stream is read that declares more
bytes than the file has, so a stream cannot expand past the file's size.
"""

from __future__ import annotations

import datetime
import struct
from email.message import EmailMessage
from email.utils import format_datetime
from typing import ClassVar

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.email import read_message
from retrieval.services.parsers.layout import file_label
from retrieval.services.parsers.sniffing import OLE2
from retrieval.services.types import ParsedDocument

INSTALL_HINT = 'install the email extra: pip install "django-retrieval[email]"'
PROPERTIES = "__properties_version1.0"
SUBSTORAGE = "__substg1.0_"
ATTACHMENT = "__attach_version1.0_#"
EMBEDDED = "__substg1.0_3701000D"  # an attachment that is a message, as a storage
# Property ids ([MS-OXPROPS]) read as strings, binary data, or 8-byte values.
SUBJECT, SENDER_NAME, SENDER_EMAIL, SENDER_SMTP = 0x0037, 0x0C1A, 0x0C1F, 0x5D01
DISPLAY_TO, DISPLAY_CC, BODY, HTML_BODY = 0x0E04, 0x0E03, 0x1000, 0x1013
ATTACH_LONG_NAME, ATTACH_NAME, ATTACH_MIME, ATTACH_DATA = 0x3707, 0x3704, 0x370E, 0x3701
#: Times a message was sent and received (PT_SYSTIME), the first present being its date.
DATE_TAGS = (0x00390040, 0x0E060040)
#: Bytes before the property entries in a properties stream: the message's, an embedded one's.
HEADER_BYTES = {0: 32, 1: 24}
#: 1601-01-01, where a FILETIME counts from in 100 ns steps.
FILETIME_EPOCH = datetime.datetime(1601, 1, 1, tzinfo=datetime.UTC)


class OutlookMsgParser(BaseParser):
    """Read an Outlook ``.msg`` message as an e-mail: subject, headers, body, attachments."""

    mime_types: ClassVar[tuple[str, ...]] = ("application/vnd.ms-outlook", OLE2)
    extensions: ClassVar[tuple[str, ...]] = (".msg",)

    def unavailable(self) -> str:
        """Name the extra to install when olefile is missing."""
        try:
            import olefile  # noqa: F401
        except ImportError:
            return f"olefile is not installed, so Outlook messages cannot be read; {INSTALL_HINT}."
        return ""

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the message as an ``.eml`` file's document, its ``format`` ``"msg"``."""
        label = file_label(filename)
        self.check_readable(data, label)
        with _Storage(data, label) as storage:
            if not storage.is_message():
                raise ParseError(
                    f"Cannot parse {label}: it is an OLE2 compound file but not an Outlook "
                    "message (a Word, Excel or PowerPoint 97-2003 file?); save it in a current "
                    "format (.docx, .xlsx, .pptx) and upload that."
                )
            message = _Converter(storage).message((), depth=0)
        return read_message(message, label=label, filename=filename, kind="msg")


class _Storage:
    """The compound file, opened strictly, its streams read within the file's size."""

    def __init__(self, data: bytes, label: str) -> None:
        import olefile

        self.label = label
        self.size = len(data)
        try:
            self.ole = olefile.OleFileIO(data, raise_defects=olefile.DEFECT_INCORRECT)
        except Exception as e:  # olefile raises OSError and its own errors, unwrapped
            raise self._unreadable(e) from e

    def __enter__(self) -> _Storage:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.ole.close()

    def is_message(self) -> bool:
        """Return whether the root holds a message's properties and property streams."""
        names = [entry[0] for entry in self.ole.listdir(streams=True, storages=True)]
        return PROPERTIES in names and any(name.startswith(SUBSTORAGE) for name in names)

    def children(self, path: tuple[str, ...]) -> list[str]:
        """Return the names of the entries right under storage ``path``."""
        depth = len(path)
        return sorted(
            {
                entry[depth]
                for entry in self.ole.listdir(streams=True, storages=True)
                if len(entry) > depth and tuple(entry[:depth]) == path
            }
        )

    def read(self, path: tuple[str, ...]) -> bytes | None:
        """Return a stream's bytes, ``None`` when there is none at ``path``."""
        if not self.ole.exists("/".join(path)):
            return None
        try:
            if self.ole.get_size("/".join(path)) > self.size:
                raise ParseError(
                    f"Cannot parse {self.label}: stream {'/'.join(path)} declares more bytes "
                    "than the file holds."
                )
            with self.ole.openstream("/".join(path)) as stream:
                return stream.read()
        except ParseError:
            raise
        except Exception as e:
            raise self._unreadable(e) from e

    def _unreadable(self, error: Exception) -> ParseError:
        return ParseError(
            f"Cannot parse {self.label}: it is not a readable compound file ({error})."
        )


class _Converter:
    """Builds an e-mail message from a message's properties, counting parts and depth."""

    def __init__(self, storage: _Storage) -> None:
        self.storage = storage
        self.parts = 0
        self.max_parts = int(retrieval_settings.MAX_EMAIL_PARTS)
        self.max_depth = int(retrieval_settings.MAX_EMAIL_DEPTH)

    def message(self, path: tuple[str, ...], *, depth: int) -> EmailMessage:
        """Return the message stored at ``path`` (``()``: the file's own) with its attachments."""
        mail = EmailMessage()
        sender = self._text(path, SENDER_NAME)
        address = self._text(path, SENDER_SMTP) or self._text(path, SENDER_EMAIL)
        if address and "@" in address:
            sender = f"{sender} <{address}>" if sender else address
        for name, value in (
            ("Subject", self._text(path, SUBJECT)),
            ("From", sender),
            ("To", self._text(path, DISPLAY_TO).replace(";", ",")),
            ("Cc", self._text(path, DISPLAY_CC).replace(";", ",")),
            ("Date", self._date(path, depth)),
        ):
            _set_header(mail, name, value)
        if body := self._text(path, BODY):
            mail.set_content(body)
        elif html := self._html(path):
            mail.set_content(html, subtype="html")
        for name in self.storage.children(path):
            if name.startswith(ATTACHMENT):
                self._attach(mail, (*path, name), depth)
        return mail

    def _attach(self, mail: EmailMessage, path: tuple[str, ...], depth: int) -> None:
        self.parts += 1
        if self.parts > self.max_parts:
            raise ParseError(
                f"Cannot parse {self.storage.label}: it has more than {self.max_parts} "
                "attachments (MAX_EMAIL_PARTS)."
            )
        if EMBEDDED in self.storage.children(path):
            if depth + 1 > self.max_depth:
                raise ParseError(
                    f"Cannot parse {self.storage.label}: it holds messages attached within "
                    f"messages more than {self.max_depth} deep (MAX_EMAIL_DEPTH)."
                )
            mail.add_attachment(self.message((*path, EMBEDDED), depth=depth + 1))
            return
        data = self.storage.read((*path, _stream(ATTACH_DATA, "0102"))) or b""
        kind = self._text(path, ATTACH_MIME)
        maintype, _, subtype = kind.partition("/")
        if not (maintype and subtype) or " " in kind:
            maintype, subtype = "application", "octet-stream"
        name = self._text(path, ATTACH_LONG_NAME) or self._text(path, ATTACH_NAME)
        mail.add_attachment(data, maintype=maintype, subtype=subtype, filename=name or None)

    def _text(self, path: tuple[str, ...], prop: int) -> str:
        """Return a string property: UTF-16 (``001F``), else 8-bit (``001E``), else ``""``."""
        if (data := self.storage.read((*path, _stream(prop, "001F")))) is not None:
            return data.decode("utf-16-le", errors="replace").rstrip("\0")
        if (data := self.storage.read((*path, _stream(prop, "001E")))) is not None:
            return _decode_8bit(data).rstrip("\0")
        return ""

    def _html(self, path: tuple[str, ...]) -> str:
        data = self.storage.read((*path, _stream(HTML_BODY, "0102")))
        return _decode_8bit(data) if data else ""

    def _date(self, path: tuple[str, ...], depth: int) -> str:
        """Return the message's sent (else received) time as a Date field, or ``""``."""
        data = self.storage.read((*path, PROPERTIES)) or b""
        header = HEADER_BYTES[min(depth, 1)]
        values: dict[int, int] = {}
        for offset in range(header, len(data) - 15, 16):
            tag, _, value = struct.unpack_from("<IIQ", data, offset)
            values[tag] = value
        for tag in DATE_TAGS:
            if value := values.get(tag):
                try:
                    moment = FILETIME_EPOCH + datetime.timedelta(microseconds=value // 10)
                except OverflowError:
                    continue
                return format_datetime(moment)
        return ""


def _stream(prop: int, kind: str) -> str:
    return f"{SUBSTORAGE}{prop:04X}{kind}"


def _decode_8bit(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _set_header(mail: EmailMessage, name: str, value: str) -> None:
    """Set header ``name`` to ``value`` on one line; a value the policy refuses is left out."""
    value = " ".join(value.split())
    if not value:
        return
    try:
        mail[name] = value
    except (ValueError, TypeError, IndexError):  # an address the header parser cannot take
        return
