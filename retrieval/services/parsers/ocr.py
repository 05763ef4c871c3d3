"""OCR, a stage any parser hands pixels to: RapidOCR's PP-OCRv4 models (the ``ocr`` extra).

``rapidocr-onnxruntime`` ships its detection and recognition ONNX models inside its
wheel, so nothing is downloaded at run time. The engine is loaded once per process and
runs one image at a time (its models use every core already). Recognised lines are put
in reading order (columns left to right, then top to bottom) and joined into paragraphs.

Work per file is bounded by the callers, through the helpers here: ``MAX_IMAGE_PIXELS``
per image, checked from its header before it is decoded; ``MAX_OCR_PAGES`` images or
pages per file, counted before the first is read; ``MAX_OCR_SECONDS`` per file, checked
between them (one image's OCR is not interrupted: its pixels bound it).
"""

from __future__ import annotations

import re
import statistics
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from retrieval.conf import retrieval_settings
from retrieval.exceptions import ParseError
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import LIST_MARKER

if TYPE_CHECKING:
    from PIL.Image import Image

INSTALL_HINT = 'install the ocr extra: pip install "django-retrieval[ocr]"'
#: Longest side, in pixels, of an image the models read; a larger one is scaled down first
#: (an A4 page scanned at 300 dpi is 3508 pixels high; its text stays legible at this size).
MAX_SIDE = 3000
#: Lines further apart than this many line heights start a new paragraph.
PARAGRAPH_GAP = 0.5
#: A blank strip at least this many line heights wide, top to bottom, separates columns.
COLUMN_GAP = 1.5
#: A row ending further than this many characters' width from its paragraph's right edge
#: ends a line (a list item, a line of code) rather than wrapping into the next row.
RUN_ON_CHARACTERS = 8
#: Lines whose middles are closer than this many line heights are one row of text.
ROW_TOLERANCE = 0.5
#: Recognised text scored lower than this is dropped (specks read as letters).
MIN_SCORE = 0.5

_LOCK = threading.Lock()
_engine: Any = None
_HYPHENATED = re.compile(r"[^\W\d_]-$")


class Line(NamedTuple):
    """One recognised line of text and its box, in pixels."""

    left: float
    top: float
    right: float
    bottom: float
    text: str


def unavailable() -> str:
    """Return why OCR cannot run here (the extra is missing, naming it), else ``""``."""
    try:
        import PIL  # noqa: F401
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError as e:
        missing = e.name or "rapidocr_onnxruntime"
        return f"OCR needs rapidocr-onnxruntime and Pillow ({missing} is missing); {INSTALL_HINT}."
    return ""


def read_text(image: Image) -> str:
    """Return the text OCR reads in ``image``, paragraphs separated by blank lines."""
    image = image.convert("RGB")
    if max(image.size) > MAX_SIDE:
        image.thumbnail((MAX_SIDE, MAX_SIDE))
    with _LOCK:  # one image at a time: the engine is not safe across threads
        found, _ = _load()(image, use_cls=False)
    lines = [_line(box, text) for box, text, score in found or () if float(score) >= MIN_SCORE]
    return "\n\n".join(paragraphs([line for line in lines if line.text]))


def _load() -> Callable[..., Any]:
    """Return the process's engine, loading its models on first use (under ``_LOCK``)."""
    global _engine
    if _engine is None:
        from rapidocr_onnxruntime import RapidOCR

        # "max": the detector reads a page scaled to at most 2000 pixels, not at least 736
        # (a wide strip of text scaled up to 736 high costs seconds).
        _engine = RapidOCR(
            max_side_len=MAX_SIDE, det_limit_type="max", text_score=MIN_SCORE, print_verbose=False
        )
    return _engine


def _line(box: list[list[float]], text: str) -> Line:
    xs, ys = [x for x, _ in box], [y for _, y in box]
    return Line(min(xs), min(ys), max(xs), max(ys), " ".join(text.split()))


def paragraphs(lines: list[Line]) -> list[str]:
    """Return the lines' text as paragraphs in reading order.

    The lines are cut recursively, as in an XY-cut: first into columns at blank strips
    at least ``COLUMN_GAP`` line heights wide, then into blocks at gaps over
    ``PARAGRAPH_GAP`` line heights; what cannot be cut is one paragraph, read row by row.
    """
    if not lines:
        return []
    height = statistics.median(line.bottom - line.top for line in lines) or 1.0
    found: list[str] = []
    _cut(lines, height, found)
    return found


def _cut(lines: list[Line], height: float, found: list[str]) -> None:
    for parts in (
        _groups(lines, 0, 2, COLUMN_GAP * height),
        _groups(lines, 1, 3, PARAGRAPH_GAP * height),
    ):
        if len(parts) > 1:
            for part in parts:
                _cut(part, height, found)
            return
    found.append(_join(lines, height))


def _groups(lines: list[Line], start: int, end: int, gap: float) -> list[list[Line]]:
    """Return ``lines`` split where nothing covers more than ``gap`` along one axis
    (``start``/``end``: the fields of a box's extent on it), in order."""
    groups: list[list[Line]] = []
    reach = float("-inf")
    for line in sorted(lines, key=lambda line: line[start]):
        if line[start] - reach > gap:
            groups.append([])
        groups[-1].append(line)
        reach = max(reach, line[end])
    return groups


def _join(lines: list[Line], height: float) -> str:
    """Return one paragraph's lines as text: rows top to bottom, each read left to right."""
    rows: list[list[Line]] = []
    for line in sorted(lines, key=lambda line: (line.top + line.bottom) / 2):
        middle = (line.top + line.bottom) / 2
        if rows and middle - _middle(rows[-1]) < ROW_TOLERANCE * height:
            rows[-1].append(line)
        else:
            rows.append([line])
    right = max(line.right for line in lines)
    text = ""
    runs_on = True
    for row in rows:
        row = sorted(row, key=lambda line: line.left)
        row_text = " ".join(line.text for line in row)
        if _HYPHENATED.search(text) and row_text[:1].islower():
            text = text[:-1] + row_text  # a word hyphenated across lines
        elif not text:
            text = row_text
        elif runs_on and not LIST_MARKER.fullmatch(row_text.split()[0]):
            text = f"{text} {row_text}"
        else:  # the row above ended short of the margin: a list item's or code line's end
            text = f"{text}\n{row_text}"
        runs_on = _runs_on(row, right)
    return text


def _runs_on(row: list[Line], right: float) -> bool:
    """Return whether a row reaches the paragraph's right edge: another word would not
    have fit after it, so the text goes on in the next row."""
    last = row[-1]
    character = (last.right - last.left) / max(len(last.text), 1)
    return last.right + RUN_ON_CHARACTERS * character >= right


def _middle(row: list[Line]) -> float:
    return sum(line.top + line.bottom for line in row) / (2 * len(row))


def check_pixels(width: int, height: int, label: str, what: str) -> None:
    """Refuse an image of more than ``MAX_IMAGE_PIXELS`` pixels (``what`` names it)."""
    limit = int(retrieval_settings.MAX_IMAGE_PIXELS)
    if width * height > limit:
        raise ParseError(
            f"Cannot parse {label}: {what} is {width} × {height} pixels; the limit is {limit} "
            "(MAX_IMAGE_PIXELS). Scale it down or split it."
        )


def check_pages(count: int, label: str, what: str) -> None:
    """Refuse more than ``MAX_OCR_PAGES`` images or pages to OCR (``count`` of ``what``),
    before reading any."""
    limit = int(retrieval_settings.MAX_OCR_PAGES)
    if count > limit:
        raise ParseError(
            f"Cannot parse {label}: it has {count} {what}; the limit is {limit} "
            "(MAX_OCR_PAGES). Split it into smaller files."
        )


def budget(label: str) -> ParseBudget:
    """Return the file's OCR time budget (``MAX_OCR_SECONDS``)."""
    return ParseBudget(label, setting="MAX_OCR_SECONDS", doing="reading its text by OCR")
