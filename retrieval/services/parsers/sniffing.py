"""What a file is by its bytes: magic numbers, and for zip containers the parts they hold.

A file's name and the MIME type a browser sends are claims; the bytes decide. Formats
with a signature (PDF, images, OLE2 compound files) are told by their first bytes; the
zip containers of Office Open XML, OpenDocument and EPUB by their ``mimetype`` member
or the parts they hold, read from the zip's directory only (nothing is decompressed but
a ``mimetype`` member of at most ``MIMETYPE_BYTES``). Text has no signature: for it
:func:`sniff` answers ``None`` and the name decides.
"""

from __future__ import annotations

import io
import zipfile

__all__ = ["ZIP", "OLE2", "describe", "sniff"]

ZIP = "application/zip"
OLE2 = "application/x-ole-storage"  # .msg, .doc, .xls, .ppt: told apart by their streams
#: How far into a file ``%PDF-`` may start (readers accept leading junk up to 1 KiB).
PDF_HEAD_BYTES = 1024
#: The sizes a BMP's second header (after its 14-byte file header) declares, by version.
BMP_HEADER_SIZES = (12, 16, 40, 52, 56, 64, 108, 124)
#: The most bytes of a container's ``mimetype`` member read (the longest real one is ~60).
MIMETYPE_BYTES = 256

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", OLE2),
    (b"\x1f\x8b", "application/gzip"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
)
#: A part only one Office Open XML kind holds, with that kind's MIME type.
_OOXML_PARTS: tuple[tuple[str, str], ...] = (
    (
        "word/document.xml",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    (
        "ppt/presentation.xml",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ("xl/workbook.xml", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
)
_NAMES = {
    ZIP: "a zip archive",
    OLE2: "an OLE2 compound file (an Outlook message or a pre-2007 Office file)",
    "application/pdf": "a PDF document",
    "application/gzip": "a gzip archive",
    "application/x-7z-compressed": "a 7-Zip archive",
    "application/vnd.rar": "a RAR archive",
    "application/epub+zip": "an EPUB book",
    _OOXML_PARTS[0][1]: "a Word document",
    _OOXML_PARTS[1][1]: "a PowerPoint presentation",
    _OOXML_PARTS[2][1]: "an Excel workbook",
}


def sniff(data: bytes) -> str | None:
    """Return the MIME type the bytes themselves declare, or ``None`` when they cannot tell.

    ``None`` means no signature: text of any kind (plain, Markdown, HTML, JSON, CSV,
    e-mail), or bytes this module does not know.
    """
    for signature, mime_type in _SIGNATURES:
        if data.startswith(signature):
            return mime_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:2] == b"BM" and int.from_bytes(data[14:18], "little") in BMP_HEADER_SIZES:
        return "image/bmp"  # "BM" alone is how text may start ("BM25 is ...")
    if b"%PDF-" in data[:PDF_HEAD_BYTES]:
        return "application/pdf"
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _container(data)
    return None


def describe(mime_type: str) -> str:
    """Return what a person calls a file of this MIME type: "a Word document"."""
    if mime_type in _NAMES:
        return _NAMES[mime_type]
    if mime_type.startswith("image/"):
        return f"a {mime_type.removeprefix('image/').upper()} image"
    if mime_type.startswith("application/vnd.oasis.opendocument."):
        return f"an OpenDocument file ({mime_type.rsplit('.', 1)[-1]})"
    return f"a file of type {mime_type}"


def _container(data: bytes) -> str:
    """Return a zip container's kind from its ``mimetype`` member or its parts; else ZIP."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception:  # noqa: BLE001 any damage (zipfile raises NotImplementedError too):
        return ZIP  # the parser chosen for a damaged zip says what is wrong
    with archive:
        names = set(archive.namelist())
        declared = _declared_mimetype(archive) if "mimetype" in names else ""
        if declared:
            return declared
        if "[Content_Types].xml" in names:
            for part, mime_type in _OOXML_PARTS:
                if part in names:
                    return mime_type
    return ZIP


def _declared_mimetype(archive: zipfile.ZipFile) -> str:
    """Return the ``mimetype`` member's text (OpenDocument, EPUB), or ``""`` if unreadable."""
    member = archive.getinfo("mimetype")
    if member.file_size > MIMETYPE_BYTES or member.compress_type not in (
        zipfile.ZIP_STORED,
        zipfile.ZIP_DEFLATED,
    ):
        return ""
    try:
        with archive.open(member) as stream:
            text = stream.read(MIMETYPE_BYTES).decode("ascii").strip()
    except Exception:  # noqa: BLE001 a damaged member declares nothing
        return ""
    return text if "/" in text and len(text.split()) == 1 else ""
