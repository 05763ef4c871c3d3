"""Same content, any format: what each format's parser gets back from it.

    python bench/formats.py [--sections ocr] [--pages N] [--dpi DPI] [--dataset NAME]

``ocr``: the character error rate of OCR on scanned pages. The first ``N`` documents
of a shared set (title and text) are each typeset on an A4 page by pymupdf (11 pt
Helvetica), the page is rendered at ``DPI`` as a scanner would and put back as an
image-only page, and the scanned PDF goes through the app's PDF parser, which renders
it again and reads it by OCR (the ``ocr`` extra). The reference is the typeset page's
own text layer. Printed per page and overall: CER (Levenshtein distance / reference
length, whitespace runs as one space), CER ignoring spaces (the models' weak point is
the gap between words, not the letters), and seconds of OCR per page.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from common import ROOT, corpus_entries, table

FONT_SIZE = 11
#: Characters of a document typeset on its page (a long abstract would overflow it).
PAGE_CHARS = 2000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sections", nargs="+", default=["ocr"], choices=["ocr"])
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--dpi", type=int, default=300, help="resolution of the scans")
    parser.add_argument("--dataset", default="scifact", choices=["scifact", "cranfield"])
    args = parser.parse_args()
    _settings()
    if "ocr" in args.sections:
        ocr_cer(args.dataset, args.pages, args.dpi)


def _settings() -> None:
    """Django settings enough for the parsers (no database: nothing is ingested)."""
    import django
    from django.conf import settings

    sys.path.insert(0, str(ROOT))  # this checkout's app, not an installed one
    settings.configure(INSTALLED_APPS=["retrieval"], USE_TZ=True)
    django.setup()


def ocr_cer(dataset: str, pages: int, dpi: int) -> None:
    """Print OCR's character error rate on pages typeset from ``dataset`` and scanned."""
    from retrieval.services.parsers.pdf import PdfParser

    entries = [e for e in corpus_entries(dataset) if e.get("text")][:pages]
    rows, totals = [], [0, 0, 0, 0]
    seconds = []
    for entry in entries:
        text = f"{entry.get('title', '')}\n\n{entry['text']}"[:PAGE_CHARS].rsplit(" ", 1)[0]
        reference, scan = _scanned_page(text, dpi)
        started = time.perf_counter()
        read = PdfParser().parse(scan, filename="scan.pdf").text
        seconds.append(time.perf_counter() - started)
        errors, length = distance(_flat(read), _flat(reference)), len(_flat(reference))
        tight = distance(_tight(read), _tight(reference)), len(_tight(reference))
        totals = [
            totals[0] + errors,
            totals[1] + length,
            totals[2] + tight[0],
            totals[3] + tight[1],
        ]
        rows.append(
            [
                entry["_id"],
                length,
                f"{errors / length:.2%}",
                f"{tight[0] / tight[1]:.2%}",
                f"{seconds[-1]:.1f}",
            ]
        )
    scans = f"typeset at {FONT_SIZE} pt, scanned at {dpi} dpi"
    print(f"## OCR on {len(entries)} {dataset} pages {scans}\n")
    rows.append(
        [
            "all",
            totals[1],
            f"{totals[0] / totals[1]:.2%}",
            f"{totals[2] / totals[3]:.2%}",
            f"{statistics.median(seconds):.1f} (median)",
        ]
    )
    print(table(["document", "characters", "CER", "CER, spaces ignored", "OCR s/page"], rows))


def _scanned_page(text: str, dpi: int) -> tuple[str, bytes]:
    """Return a typeset A4 page's text layer, and the page scanned: an image-only PDF."""
    import pymupdf

    with pymupdf.open() as typeset, pymupdf.open() as scanned:
        page = typeset.new_page(width=595, height=842)
        page.insert_textbox(page.rect + (56, 56, -56, -56), text, fontsize=FONT_SIZE)
        reference = page.get_text()
        image = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes("png")
        target = scanned.new_page(width=595, height=842)
        target.insert_image(target.rect, stream=image)
        return reference, scanned.tobytes()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _tight(text: str) -> str:
    return "".join(text.split())


def distance(a: str, b: str) -> int:
    """Return the Levenshtein distance between ``a`` and ``b`` (one row at a time)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, start=1):
        current = [i]
        for j, other in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            )
        previous = current
    return previous[-1]


if __name__ == "__main__":
    main()
