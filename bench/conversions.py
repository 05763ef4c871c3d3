"""The same documents in other formats: pandoc writes DOCX, ODT and EPUB, pymupdf typesets PDF.

Each source file (Markdown or reStructuredText) of a real-documents set is converted
once into ``bench/.cache/formats/<set>/<format>/``, under its own relative path with the
format's extension. pandoc (the ``pypandoc-binary`` wheel of the dev extra) writes
DOCX, ODT and EPUB 3 directly. Its PDF writer needs a LaTeX engine, so a PDF is
pandoc's HTML typeset by pymupdf's ``Story`` on A4 pages, with a running header (the
set's name) and a page number on every page, as a printed manual has.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from common import CACHE

FORMATS = ("docx", "odt", "epub", "pdf")
#: pandoc's reader of each source extension: Markdown as CommonMark (GFM), as MkDocs and
#: the app read it; pandoc's own Markdown takes ```` ```python title="main.py" ```` for no
#: fence, and the code's ``# comments`` for headings.
READERS = {".md": "gfm", ".rst": "rst"}
#: pandoc's writer of each format but PDF.
WRITERS = {"docx": "docx", "odt": "odt", "epub": "epub3"}
MARGIN = 56  # points: 2 cm
CSS = (
    "body {font-family: sans-serif; font-size: 10pt;} "
    "pre, code {font-family: monospace; font-size: 8.5pt;} "
    "h1 {font-size: 18pt;} h2 {font-size: 14pt;} h3 {font-size: 12pt;}"
)
_IMAGE = re.compile(r"<img\b[^>]*>", re.IGNORECASE)


def converted(name: str, fmt: str, sources: list[Path], docs: Path, *, header: str) -> list[Path]:
    """Return the set's files in format ``fmt``, converting those not converted yet."""
    folder = CACHE / "formats" / name / fmt
    paths = []
    for source in sources:
        target = (folder / source.relative_to(docs)).with_suffix(f".{fmt}")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(convert(source, fmt, docs, header=header))
        paths.append(target)
    return paths


def convert(source: Path, fmt: str, docs: Path, *, header: str) -> bytes:
    """Return ``source`` written as ``fmt`` (images looked up from ``docs``)."""
    import tempfile

    import pypandoc

    reader = READERS[source.suffix]
    resources = [f"--resource-path={source.parent}:{docs}"]
    if fmt == "pdf":
        html = pypandoc.convert_file(
            str(source),
            "html5",
            format=reader,
            extra_args=[*resources, "--syntax-highlighting=none"],
        )
        return typeset(html, header=header)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"out.{fmt}"
        pypandoc.convert_file(
            str(source), WRITERS[fmt], format=reader, outputfile=str(out), extra_args=resources
        )
        return out.read_bytes()


def typeset(html: str, *, header: str) -> bytes:
    """Return HTML typeset as an A4 PDF, a running header and the page number on each page."""
    import pymupdf

    story = pymupdf.Story(html=_IMAGE.sub("", html), user_css=CSS)
    buffer = io.BytesIO()
    writer = pymupdf.DocumentWriter(buffer)
    page_rect = pymupdf.paper_rect("a4")
    body = page_rect + (MARGIN, MARGIN + 8, -MARGIN, -MARGIN - 8)
    more = True
    while more:
        device = writer.begin_page(page_rect)
        more, _ = story.place(body)
        story.draw(device)
        writer.end_page()
    writer.close()
    with pymupdf.open("pdf", buffer.getvalue()) as pdf:
        for page in pdf:
            page.insert_text((MARGIN, MARGIN - 16), header, fontsize=8)
            number = str(page.number + 1)
            page.insert_text(
                (page_rect.width / 2, page_rect.height - MARGIN + 24), number, fontsize=8
            )
        return pdf.tobytes(garbage=3, deflate=True)


def scanned(pdf: bytes, page_number: int, dpi: int) -> tuple[str, bytes]:
    """Return a PDF page's text layer, and the page scanned: an image-only PDF."""
    import pymupdf

    with pymupdf.open("pdf", pdf) as typeset_pdf, pymupdf.open() as scan:
        page = typeset_pdf[page_number]
        image = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes("png")
        target = scan.new_page(width=page.rect.width, height=page.rect.height)
        target.insert_image(target.rect, stream=image)
        return page.get_text(), scan.tobytes()
