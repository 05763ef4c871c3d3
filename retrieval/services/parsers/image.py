"""Images read by OCR (the ``ocr`` extra): PNG, JPEG, TIFF (each page a section), WebP, BMP.

Pillow reads the image's header, and each page's of a multi-page TIFF, before any pixel
is decoded: every page is checked against ``MAX_IMAGE_PIXELS`` and their count against
``MAX_OCR_PAGES`` first; then each page is decoded and read by :mod:`.ocr`, within
``MAX_OCR_SECONDS``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers import ocr
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.layout import TextBuilder, file_label, first_line, stem_title
from retrieval.services.types import ParsedDocument

if TYPE_CHECKING:
    from PIL.Image import Image

#: What Pillow may open: only these formats' readers run (none that calls out to a
#: program, as EPS does Ghostscript).
FORMATS = ("PNG", "JPEG", "TIFF", "WEBP", "BMP")


class ImageParser(BaseParser):
    """Read the text in an image by OCR: one section per page (a TIFF may hold several)."""

    mime_types: ClassVar[tuple[str, ...]] = (
        "image/png",
        "image/jpeg",
        "image/tiff",
        "image/webp",
        "image/bmp",
    )
    extensions: ClassVar[tuple[str, ...]] = (
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
        ".webp",
        ".bmp",
    )

    def unavailable(self) -> str:
        """Name the extra to install when the OCR engine or Pillow is missing."""
        return ocr.unavailable()

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return each page's text read by OCR, a section per page."""
        label = file_label(filename)
        self.check_readable(data, label)
        image = _open(data, label)
        with image:
            pages = _count_pages(image, label)
            builder = TextBuilder()
            budget = ocr.budget(label)
            for number, page in enumerate(_pages(image, pages, label), start=1):
                budget.check(f"before page {number} of {pages}")
                text = ocr.read_text(page)
                if text:
                    builder.block_break()
                    # A scanned document's pages: a chunk may run on over a page turn.
                    builder.open_section(page=number, continues=True)
                    builder.write_lines(text)
        text, sections = builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: OCR found no text in it.")
        return ParsedDocument(
            text=text,
            title=stem_title(filename) or first_line(text),
            sections=sections,
            metadata={"format": image.format.lower(), "page_count": pages, "ocr": True},
        )


def _open(data: bytes, label: str) -> Image:
    """Return the image opened lazily (its header read, no pixels decoded)."""
    from PIL import Image, UnidentifiedImageError

    try:
        return Image.open(io.BytesIO(data), formats=FORMATS)
    except Image.DecompressionBombError as e:  # Pillow's own bound, past ours
        raise ParseError(
            f"Cannot parse {label}: it has more pixels than the limit of "
            f"{int(retrieval_settings.MAX_IMAGE_PIXELS)} (MAX_IMAGE_PIXELS) ({e})"
        ) from e
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise ParseError(
            f"Cannot parse {label}: it is not a readable {' / '.join(FORMATS)} image."
        ) from e


def _count_pages(image: Image, label: str) -> int:
    """Return the image's page count, each page's size checked from its header."""
    limit = int(retrieval_settings.MAX_OCR_PAGES)
    count = 0
    for count in range(1, limit + 2):
        if not _seek(image, count - 1, label):
            return count - 1
        what = f"page {count}" if count > 1 else "it"
        ocr.check_pixels(*image.size, label, what)
    ocr.check_pages(count, label, "pages or more")
    return count  # not reached: check_pages refuses


def _pages(image: Image, count: int, label: str) -> Iterator[Image]:
    """Yield each page decoded, as RGB."""
    for index in range(count):
        _seek(image, index, label)
        try:
            _draft(image)
            yield image.convert("RGB")
        except (OSError, ValueError, SyntaxError) as e:  # truncated or corrupt pixel data
            raise ParseError(
                f"Cannot parse {label}: page {index + 1} cannot be decoded ({e})."
            ) from e


def _draft(image: Image) -> None:
    """Have a JPEG decoded at about the scale OCR reads it at, not in full then shrunk."""
    scale = ocr.MAX_SIDE / max(image.size)
    if scale < 1:
        image.draft("RGB", (math.ceil(image.width * scale), math.ceil(image.height * scale)))


def _seek(image: Image, index: int, label: str) -> bool:
    """Move to page ``index``; return False past the last page."""
    try:
        image.seek(index)
    except EOFError:
        return False
    except (OSError, ValueError, SyntaxError) as e:
        raise ParseError(f"Cannot parse {label}: page {index + 1} is damaged ({e}).") from e
    return True
