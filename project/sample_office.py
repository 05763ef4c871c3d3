"""Write the demo's office samples: a Word file, a slide deck and a spreadsheet.

They are made at demo time by the libraries that write these formats (python-docx,
python-pptx, openpyxl: the ``dev`` and ``office`` extras), so that no binary file is kept
in the repository, and are indexed with ``project/sample_docs`` by ``python3 dev.py demo``.

Run::

    python project/sample_office.py FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

import docx
import openpyxl
import pptx
from pptx.util import Inches

#: The file-format limits: setting, default, what it bounds.
LIMITS = [
    ("setting", "default", "what it bounds"),
    ("MAX_UPLOAD_BYTES", "20 MB", "the size of one uploaded file"),
    ("MAX_ARCHIVE_RATIO", "100", "how many times a zip member may expand"),
    ("MAX_SHEETS", "100", "sheets of an Excel or OpenDocument workbook"),
    ("MAX_TABLE_CELLS", "1000000", "cells of all the tables of one file"),
    ("MAX_SLIDES", "1000", "slides of a PowerPoint or OpenDocument presentation"),
    ("MAX_PARSE_SECONDS", "60", "the time one file may take to parse"),
]


def write_word(path: Path) -> None:
    document = docx.Document()
    document.core_properties.title = "Office documents in django-retrieval"
    document.add_paragraph("Office documents in django-retrieval", style="Title")
    document.add_heading("Uploading office files", level=1)
    document.add_paragraph(
        "Editors drag Word, PowerPoint, Excel and OpenDocument files into the admin's "
        "upload; the API and the retrieval_ingest command read the same formats."
    )
    document.add_heading("What becomes structure", level=2)
    document.add_paragraph(
        "Word headings become the heading path of every chunk under them, so a search "
        "result says which chapter and section it comes from."
    )
    for item in ("lists keep their bullets and numbers", "tables become column: value rows"):
        document.add_paragraph(item, style="List Bullet")
    document.add_heading("Installing the office extra", level=2)
    document.add_paragraph(
        'Install it with pip install "django-retrieval[office]"; without it an upload of '
        "a Word file is refused with a message naming the extra."
    )
    document.save(path)


def write_deck(path: Path) -> None:
    deck = pptx.Presentation()
    deck.core_properties.title = "Search quality review"
    slide = deck.slides.add_slide(deck.slide_layouts[0])
    slide.shapes.title.text = "Search quality review"
    slide.placeholders[1].text = "Hybrid search, reranking and golden sets"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Hybrid search wins"
    frame = slide.placeholders[1].text_frame
    frame.text = "Exact BM25 inside PostgreSQL finds the rare words"
    frame.add_paragraph().text = "Dense vectors find the paraphrases"
    frame.add_paragraph().text = "Fusion keeps the best of both"
    slide.notes_slide.notes_text_frame.text = (
        "Show the golden set's MRR before and after turning on the reranker."
    )
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Retrievers compared"
    rows = [("retriever", "hit@5"), ("dense", "0.81"), ("bm25", "0.78"), ("hybrid", "0.88")]
    table = slide.shapes.add_table(4, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    deck.save(path)


def write_spreadsheet(path: Path) -> None:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "File limits"
    for row in LIMITS:
        sheet.append(row)
    workbook.properties.title = "File-format limits"
    workbook.save(path)


def write_samples(folder: Path) -> list[Path]:
    """Write the three samples into ``folder`` (created if needed); return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "office-guide.docx", folder / "quality-review.pptx", folder / "limits.xlsx"]
    for write, path in zip((write_word, write_deck, write_spreadsheet), paths, strict=True):
        write(path)
    return paths


if __name__ == "__main__":
    write_samples(Path(sys.argv[1]))
