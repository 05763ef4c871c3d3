"""The same documents in other formats: pandoc writes DOCX, ODT and EPUB, pymupdf typesets PDF.

Each source file (Markdown or reStructuredText) of a real-documents set is converted
once into ``bench/.cache/formats/<set>/<format>/``, under its own relative path with the
format's extension. pandoc (the ``pypandoc-binary`` wheel of the dev extra) writes
DOCX, ODT and EPUB 3 directly. Its PDF writer needs a LaTeX engine, so a PDF is
pandoc's HTML typeset by pymupdf's ``Story`` on A4 pages, with a running header (the
set's name) and a page number on every page, as a printed manual has.

Markdown written for MkDocs is first put as MkDocs renders it (``as_rendered``): an
admonition (``!!! note "Title"``) becomes its title and its body, a mkdocstrings
directive (``::: package.Class`` and its indented options) the object's name. pandoc
does not know that syntax, and would print the markers and the options as words in
every format, which a PDF made from the site would not hold. So are reStructuredText's
Sphinx roles (``sphinx_roles``): ``:ref:`Title <label>``` is ``Title`` and
``:func:`~flask.url_for``` is ``url_for``, as Sphinx prints them.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from common import CACHE

FORMATS = ("docx", "odt", "epub", "pdf", "scan")
#: The extension of a format's files where it is not the format's name: a scan is a PDF
#: of page images (the PDF's pages rendered at ``SCAN_DPI``, as a scanner gives them).
EXTENSIONS = {"scan": "pdf"}
SCAN_DPI = 300
JPEG_QUALITY = 80
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
_ADMONITION = re.compile(
    r"(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[\w-]+)"
    r"(?:[ \t]+\"(?P<title>[^\"]*)\")?[ \t]*"
)
#: A Sphinx role: ``:func:`name```, ``:py:meth:`~a.b```, ``:ref:`Title <label>```.
_ROLE = re.compile(r":(?:[\w-]+:)?([\w-]+):`([^`]+)`")
#: Roles Sphinx prints as code.
_CODE_ROLES = {"func", "meth", "class", "attr", "data", "exc", "obj", "mod", "const", "envvar"}
_AUTODOC = re.compile(r"(?P<indent>[ \t]*):::[ \t]+(?P<name>[\w.:-]+)[ \t]*")


def converted(name: str, fmt: str, sources: list[Path], docs: Path, *, header: str) -> list[Path]:
    """Return the set's files in format ``fmt``, converting those not converted yet."""
    paths = []
    for source in sources:
        path = target(name, fmt, source, docs)
        if not path.exists():
            if fmt == "scan":
                pdf = converted(name, "pdf", [source], docs, header=header)[0].read_bytes()
                data = scan(pdf, SCAN_DPI)
            else:
                data = convert(source, fmt, docs, header=header)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        paths.append(path)
    return paths


def target(name: str, fmt: str, source: Path, docs: Path) -> Path:
    """Return where ``source`` (under ``docs``) is kept converted to ``fmt``."""
    folder = CACHE / "formats" / name / fmt
    return (folder / source.relative_to(docs)).with_suffix(f".{EXTENSIONS.get(fmt, fmt)}")


def convert(source: Path, fmt: str, docs: Path, *, header: str) -> bytes:
    """Return ``source`` written as ``fmt`` (images looked up from ``docs``)."""
    import tempfile

    import pypandoc

    reader = READERS[source.suffix]
    resources = [f"--resource-path={source.parent}:{docs}"]
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".md":
        text = as_rendered(text)
    elif source.suffix == ".rst":
        text = sphinx_roles(text)
    if fmt == "pdf":
        html = pypandoc.convert_text(
            text, "html5", format=reader, extra_args=[*resources, "--syntax-highlighting=none"]
        )
        return typeset(html, header=header)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"out.{fmt}"
        pypandoc.convert_text(
            text, WRITERS[fmt], format=reader, outputfile=str(out), extra_args=resources
        )
        return out.read_bytes()


def as_rendered(markdown: str) -> str:
    """Return MkDocs Markdown with its admonitions and mkdocstrings directives as MkDocs
    renders them: a title paragraph and the body dedented; the object's name alone."""
    lines = markdown.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        found = _ADMONITION.fullmatch(line) or _AUTODOC.fullmatch(line)
        if not found:
            out.append(line)
            index += 1
            continue
        indent = found["indent"]
        body, index = _indented_below(lines, index + 1, len(indent))
        if found.re is _AUTODOC:  # the options below are YAML, not words
            out += [f"{indent}`{found['name']}`", ""]
            continue
        title = found["title"] or found["kind"].capitalize()
        out += [f"{indent}**{title}**", ""]
        out += as_rendered("\n".join(_dedent(body, len(indent) + 4))).split("\n")
    return "\n".join(out)


def sphinx_roles(rst: str) -> str:
    """Return reStructuredText with Sphinx's roles put as Sphinx prints them."""

    def printed(match: re.Match[str]) -> str:
        role, content = match[1], match[2].strip()
        if content.endswith(">") and "<" in content:
            return content[: content.rindex("<")].strip()
        content = content.removeprefix("!")
        if content.startswith("~"):
            content = content[1:].rsplit(".", 1)[-1]
        return f"``{content}``" if role in _CODE_ROLES else content

    return _ROLE.sub(printed, rst)


def _indented_below(lines: list[str], start: int, indent: int) -> tuple[list[str], int]:
    """Return the lines from ``start`` indented more than ``indent`` (blank ones between
    them included), and the index after them."""
    end = start
    while end < len(lines):
        line = lines[end]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1  # the blank lines after the block stay outside it
    return lines[start:end], end


def _dedent(lines: list[str], width: int) -> list[str]:
    return [line[width:] if line[:width].isspace() else line.lstrip() for line in lines]


def typeset(html: str, *, header: str) -> bytes:
    """Return HTML typeset as an A4 PDF, a running header and the page number on each page,
    and its headings as the outline (bookmarks), as LaTeX's hyperref writes them."""
    import pymupdf

    story = pymupdf.Story(html=_IMAGE.sub("", html), user_css=CSS)
    buffer = io.BytesIO()
    writer = pymupdf.DocumentWriter(buffer)
    page_rect = pymupdf.paper_rect("a4")
    body = page_rect + (MARGIN, MARGIN + 8, -MARGIN, -MARGIN - 8)
    headings: list[tuple[int, str, int]] = []

    def record(position) -> None:
        if position.heading and position.open_close & 1 and position.text.strip():
            headings.append((position.heading, position.text.strip(), position.page))

    more, page = True, 0
    while more:
        page += 1
        device = writer.begin_page(page_rect)
        more, _ = story.place(body)
        story.element_positions(record, {"page": page})
        story.draw(device)
        writer.end_page()
    writer.close()
    with pymupdf.open("pdf", buffer.getvalue()) as pdf:
        for page in pdf:
            page.insert_text((MARGIN, MARGIN - 16), header, fontsize=8)
            foot = (page_rect.width / 2, page_rect.height - MARGIN + 24)
            page.insert_text(foot, str(page.number + 1), fontsize=8)
        pdf.set_toc(_outline(headings))
        return pdf.tobytes(garbage=3, deflate=True)


def _outline(headings: list[tuple[int, str, int]]) -> list[list]:
    """Return headings as a table of contents nested as the source nests them: a heading's
    depth is one more than the number of headings above it of a higher rank (a page opening
    at a level-2 heading has it at depth 1, as hyperref nests it)."""
    toc: list[list] = []
    above: list[int] = []  # the levels of the open headings
    for level, title, page in headings:
        while above and above[-1] >= level:
            above.pop()
        above.append(level)
        toc.append([len(above), title, page])
    return toc


def scanned(pdf: bytes, page_number: int, dpi: int) -> tuple[str, bytes]:
    """Return a PDF page's text layer, and the page scanned: an image-only PDF."""
    import pymupdf

    with pymupdf.open("pdf", pdf) as typeset_pdf:
        # In reading order: the running header, inserted last, is read first from the scan.
        text = typeset_pdf[page_number].get_text(sort=True)
    return text, scan(pdf, dpi, pages=[page_number])


def scan(pdf: bytes, dpi: int, *, pages: list[int] | None = None) -> bytes:
    """Return the PDF's pages (all, or those numbered in ``pages``, 0-based) scanned in
    grey at ``dpi``: a PDF of page images (JPEG, as scanners store them), no text layer."""
    import pymupdf

    with pymupdf.open("pdf", pdf) as typeset_pdf, pymupdf.open() as scanned_pdf:
        for number in range(typeset_pdf.page_count) if pages is None else pages:
            page = typeset_pdf[number]
            pixmap = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
            image = pixmap.tobytes("jpg", jpg_quality=JPEG_QUALITY)
            copy = scanned_pdf.new_page(width=page.rect.width, height=page.rect.height)
            copy.insert_image(copy.rect, stream=image)
        return scanned_pdf.tobytes()
