"""Images and scanned PDFs made in the tests: text drawn by pymupdf, rendered to pixels."""

from __future__ import annotations

import io
import struct
import zlib

import pymupdf

#: Scans at this resolution keep the spaces between words legible to the OCR models.
SCAN_DPI = 200


def rendered(text: str, *, width: float = 320, height: float = 110) -> pymupdf.Pixmap:
    """Return a small page holding ``text`` (12 pt), rendered at ``SCAN_DPI``."""
    with pymupdf.open() as document:
        page = document.new_page(width=width, height=height)
        page.insert_textbox(pymupdf.Rect(12, 12, width - 12, height - 12), text, fontsize=12)
        return page.get_pixmap(dpi=SCAN_DPI)


def image_bytes(text: str, kind: str = "png") -> bytes:
    """Return ``text`` rendered as a PNG or JPEG file."""
    return rendered(text).tobytes(kind, **({"jpg_quality": 90} if kind == "jpg" else {}))


def tiff_bytes(pages: list[str]) -> bytes:
    """Return a multi-page TIFF, one page per text."""
    images = [rendered(text).pil_image() for text in pages]
    out = io.BytesIO()
    images[0].save(out, format="TIFF", save_all=True, append_images=images[1:])
    return out.getvalue()


def scanned_pdf(pages: list[str | bytes]) -> bytes:
    """Return a PDF whose pages are images only: a text is rendered and scanned, bytes are
    a PNG put on its page as they are (the same image's object on every page it is on)."""
    with pymupdf.open() as document:
        inserted: dict[bytes, int] = {}
        for content in pages:
            png = image_bytes(content) if isinstance(content, str) else content
            page = document.new_page(width=320, height=110)
            if png in inserted:
                page.insert_image(page.rect, xref=inserted[png])
            else:
                inserted[png] = page.insert_image(page.rect, stream=png)
        return document.tobytes(garbage=1)


def png_header(width: int, height: int) -> bytes:
    """Return a PNG declaring ``width`` × ``height`` pixels, with a few bytes of pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(width + 1)))
        + chunk(b"IEND", b"")
    )
