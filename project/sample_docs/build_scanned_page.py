"""Write ``scanned-notice.pdf``, a scanned page for the demo: an image, no text layer.

A short office notice is typeset by pymupdf, rendered at 200 dpi in grey as a scanner
would, and put back on a page as an image only, so the app can find its words only
by OCR (the ``ocr`` extra). ``python3 dev.py demo`` writes it at start-up into
``build/scanned-samples`` (not here: a scan made at demo time is no source file) and
indexes it with the other samples.

Run::

    python project/sample_docs/build_scanned_page.py FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

import pymupdf

NAME = "scanned-notice.pdf"
NOTICE = "\n\n".join(
    (
        "Notice to all staff: the paper archive moves",
        "From the first of March, the paper archive moves from the basement to room 3.14 "
        "on the third floor.",
        "Signed contracts, delivery notes and invoices older than 2019 are kept there in "
        "grey boxes, one box per year. Ask the front desk for the key.",
        "Scanned copies of these records can be searched in the handbook collection, like "
        "this notice.",
    )
)
#: Resolution of the scan: text at 11 pt keeps the spaces between its words legible.
DPI = 200


def scanned_page() -> bytes:
    """Return a one-page PDF whose page is the notice's scan."""
    with pymupdf.open() as typeset, pymupdf.open() as scanned:
        page = typeset.new_page(width=595, height=842)
        page.insert_textbox(page.rect + (72, 72, -72, -72), NOTICE, fontsize=11)
        image = page.get_pixmap(dpi=DPI, colorspace=pymupdf.csGRAY).tobytes("png")
        target = scanned.new_page(width=595, height=842)
        target.insert_image(target.rect, stream=image)
        scanned.set_metadata({"title": "Notice: the paper archive moves"})
        return scanned.tobytes(garbage=1, deflate=True)


def main() -> None:
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NAME).write_bytes(scanned_page())


if __name__ == "__main__":
    main()
