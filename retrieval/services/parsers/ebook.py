"""EPUB books (EPUB 2 and 3): chapters in reading order, each a section headed by its title.

An EPUB is a zip of XHTML chapters listed by a package document (the OPF, found through
``META-INF/container.xml``): its metadata gives the book's title and authors, its spine
the chapters' order. A chapter's title comes from the book's table of contents (the EPUB 3
navigation document, else the EPUB 2 NCX), else from its first heading; the chapter is read
by the app's HTML parser, its own headings nested under its title, so a chunk's heading path
reads "Chapter › Section".

The book is read here rather than through ebooklib (AGPL-3.0, an unfit dependency for an
MIT app; it also parses with lxml and reads members unbounded). Work per book is bounded:
the zip is checked against the archive limits (``MAX_ARCHIVE_*``) before any member is read,
and ``zipfile`` reads no member past its declared size, so the chapters' bytes together are
at most ``MAX_ARCHIVE_BYTES`` and there are at most ``MAX_ARCHIVE_MEMBERS`` of them (a chapter
listed twice in the spine is read once); ``MAX_PARSE_SECONDS`` is checked between chapters.
The package, navigation and NCX documents are read through ``defusedxml`` (no entity
expansion, no external entities), and a chapter declaring entities is refused too.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote, urldefrag

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.html import HtmlParser
from retrieval.services.parsers.layout import TextBuilder, clip_title, file_label, stem_title
from retrieval.services.types import ParsedDocument
from retrieval.validation.archives import ArchiveError, check_declared

INSTALL_HINT = 'install the ebook extra: pip install "django-retrieval[ebook]"'
CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
#: Spine items read as chapters; images and SVG pages in the spine have no text to read.
CHAPTER_TYPES = frozenset({"application/xhtml+xml", "text/html"})
NCX_TYPE = "application/x-dtbncx+xml"
EPUB_OPS = "{http://www.idpf.org/2007/ops}"


@dataclass(frozen=True)
class _Package:
    """What the OPF says: the book's metadata, and its chapters' paths in reading order."""

    title: str
    authors: tuple[str, ...]
    language: str
    chapters: tuple[str, ...]
    nav: str  # the EPUB 3 navigation document's path, or ""
    ncx: str  # the EPUB 2 NCX's path, or ""


class EpubParser(BaseParser):
    """Read an EPUB book: a section per chapter in spine order, titled by its contents page."""

    mime_types: ClassVar[tuple[str, ...]] = ("application/epub+zip",)
    extensions: ClassVar[tuple[str, ...]] = (".epub",)

    def unavailable(self) -> str:
        """Name the extra to install when defusedxml is missing."""
        try:
            import defusedxml.ElementTree  # noqa: F401
        except ImportError:
            return (
                f"defusedxml is not installed, so the book's XML cannot be read safely; "
                f"{INSTALL_HINT}."
            )
        return ""

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the chapters' text in spine order, a section per chapter and heading."""
        label = file_label(filename)
        self.check_readable(data, label)
        budget = ParseBudget(label)
        builder = TextBuilder()
        with _Book(data, label) as book:
            package = book.package()
            book.check_not_encrypted(package.chapters)
            titles = book.toc_titles(package)
            written = 0
            for number, path in enumerate(package.chapters, start=1):
                budget.check(f"before chapter {number} ({path})")
                written += _write_chapter(builder, book.chapter(path), path, titles.get(path, ""))
        text, sections = builder.build()
        if not text:
            raise ParseError(f"Cannot parse {label}: its chapters have no text.")
        metadata: dict[str, Any] = {"format": "epub", "chapters": written}
        if package.authors:
            metadata["authors"] = list(package.authors)
        if package.language:
            metadata["language"] = package.language
        return ParsedDocument(
            text=text,
            title=package.title or stem_title(filename),
            sections=sections,
            metadata=metadata,
        )


def _write_chapter(builder: TextBuilder, data: bytes, path: str, title: str) -> int:
    """Write one chapter's sections under its ``title``; return 1 if it had text, else 0.

    A chapter without text (a cover, an image page) is left out.
    """
    try:
        chapter = HtmlParser().parse(data, filename=posixpath.basename(path))
    except ParseError:  # no visible text
        return 0
    title = title or next((s.heading_path[0] for s in chapter.sections if s.heading_path), "")
    for section in chapter.sections:
        path_in_chapter = section.heading_path
        if title and path_in_chapter[:1] != (title,):
            path_in_chapter = (title, *path_in_chapter)
        builder.open_section(heading_path=path_in_chapter)
        builder.write_lines(chapter.text[section.start : section.end])
        builder.block_break()
    return 1


class _Book:
    """The book's zip, checked against the archive limits, and its XML read safely."""

    def __init__(self, data: bytes, label: str) -> None:
        self.label = label
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile as e:
            raise ParseError(f"Cannot parse {label}: it is not an EPUB book (not a zip).") from e
        except Exception as e:  # a damaged directory: a bad offset, an unknown zip version ...
            raise ParseError(f"Cannot parse {label}: it is not a readable zip ({e}).") from e
        try:
            check_declared(self.archive)
        except ArchiveError as e:
            self.archive.close()
            raise ParseError(f"Cannot parse {label}: {e}") from e
        self.names = set(self.archive.namelist())
        if CONTAINER not in self.names:
            raise ParseError(
                f"Cannot parse {label}: it is not an EPUB book (the zip has no {CONTAINER})."
            )

    def __enter__(self) -> _Book:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.archive.close()

    def package(self) -> _Package:
        """Return the OPF's metadata and chapters, found through ``META-INF/container.xml``."""
        container = self.xml(CONTAINER)
        opf = next(
            (
                e.get("full-path", "")
                for e in _elements(container, "rootfile")
                if e.get("full-path")
            ),
            "",
        )
        if not opf:
            raise ParseError(f"Cannot parse {self.label}: {CONTAINER} names no package document.")
        root = self.xml(opf)
        base = posixpath.dirname(opf)
        manifest = {
            item.get("id", ""): (
                _resolve(base, item.get("href", "")),
                item.get("media-type", ""),
                item.get("properties", "").split(),
            )
            for item in _elements(root, "item")
        }
        chapters: list[str] = []
        for itemref in _elements(root, "itemref"):
            path, media_type, _ = manifest.get(itemref.get("idref", ""), ("", "", []))
            if media_type in CHAPTER_TYPES and path not in chapters:
                chapters.append(path)
        spine = next(_elements(root, "spine"), None)
        ncx_id = spine.get("toc", "") if spine is not None else ""
        nav = next((path for path, _, props in manifest.values() if "nav" in props), "")
        ncx = manifest.get(ncx_id, ("", "", []))[0] or next(
            (path for path, kind, _ in manifest.values() if kind == NCX_TYPE), ""
        )
        if not chapters:
            raise ParseError(f"Cannot parse {self.label}: its spine lists no chapters.")
        return _Package(
            title=_first_text(root, "title"),
            authors=tuple(a for e in _elements(root, "creator") if (a := _text(e))),
            language=_first_text(root, "language"),
            chapters=tuple(chapters),
            nav=nav,
            ncx=ncx,
        )

    def check_not_encrypted(self, chapters: tuple[str, ...]) -> None:
        """Refuse a book whose chapters are encrypted (DRM); obfuscated fonts are fine."""
        if ENCRYPTION not in self.names:
            return
        encrypted = {
            _resolve("", reference.get("URI", ""))
            for reference in _elements(self.xml(ENCRYPTION), "CipherReference")
        }
        if locked := [path for path in chapters if path in encrypted]:
            raise ParseError(
                f"Cannot parse {self.label}: its chapters are encrypted (DRM), {locked[0]} "
                "first; upload a copy without DRM."
            )

    def toc_titles(self, package: _Package) -> dict[str, str]:
        """Return each chapter's title from the navigation document, else the NCX.

        A table of contents that is not well-formed is passed over (chapters are then
        titled by their first heading); one declaring entities is refused.
        """
        for path, read_titles in ((package.nav, _nav_titles), (package.ncx, _ncx_titles)):
            if not path or path not in self.names:
                continue
            try:
                root = self.xml(path)
            except _Malformed:
                continue
            if titles := read_titles(root, path):
                return titles
        return {}

    def chapter(self, path: str) -> bytes:
        """Return a chapter's bytes; refuse one declaring XML entities."""
        data = self.read(path)
        if b"<!ENTITY" in data:
            raise ParseError(
                f"Cannot parse {self.label}: chapter {path} declares XML entities, "
                "which are refused."
            )
        return data

    def read(self, path: str) -> bytes:
        """Return a member's bytes (at most its declared size: ``zipfile`` stops there)."""
        if path not in self.names:
            raise ParseError(f"Cannot parse {self.label}: it lists {path}, which it does not hold.")
        try:
            return self.archive.read(path)
        except Exception as e:  # a damaged member: BadZipFile, zlib.error, a negative seek ...
            raise ParseError(f"Cannot parse {self.label}: {path} cannot be read ({e}).") from e

    def xml(self, path: str) -> Any:
        """Return a member parsed by defusedxml; refuse entities, name malformed XML."""
        from defusedxml import DefusedXmlException
        from defusedxml.ElementTree import ParseError as XmlError
        from defusedxml.ElementTree import fromstring

        data = self.read(path)
        try:
            return fromstring(data)
        except DefusedXmlException as e:
            raise ParseError(
                f"Cannot parse {self.label}: {path} declares XML entities or external "
                f"references, which are refused ({e!r})."
            ) from e
        except XmlError as e:
            raise _Malformed(
                f"Cannot parse {self.label}: {path} is not well-formed XML ({e})."
            ) from e


class _Malformed(ParseError):
    """A member that is not well-formed XML."""


def _nav_titles(root: Any, path: str) -> dict[str, str]:
    """Return chapter path -> title from an EPUB 3 navigation document's ``toc`` nav."""
    navs = list(_elements(root, "nav"))
    toc = next((nav for nav in navs if "toc" in nav.get(f"{EPUB_OPS}type", "").split()), None)
    titles: dict[str, str] = {}
    for link in _elements(toc if toc is not None else root, "a"):
        if (href := link.get("href")) and (title := _text(link)):
            titles.setdefault(_resolve(posixpath.dirname(path), href), title)
    return titles


def _ncx_titles(root: Any, path: str) -> dict[str, str]:
    """Return chapter path -> title from an EPUB 2 NCX's navigation points."""
    titles: dict[str, str] = {}
    for point in _elements(root, "navPoint"):
        label = next(_elements(point, "navLabel"), None)
        content = next(_elements(point, "content"), None)
        if label is None or content is None or not (src := content.get("src")):
            continue
        if title := _text(label):
            titles.setdefault(_resolve(posixpath.dirname(path), src), title)
    return titles


def _elements(root: Any, name: str) -> Iterator[Any]:
    """Yield the elements named ``name`` under ``root`` whatever their namespace, in order."""
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag.rpartition("}")[2] == name:
            yield element


def _text(element: Any) -> str:
    return clip_title("".join(element.itertext()))


def _first_text(root: Any, name: str) -> str:
    return next((text for element in _elements(root, name) if (text := _text(element))), "")


def _resolve(base: str, href: str) -> str:
    """Return the zip member an ``href`` relative to ``base`` names, its fragment dropped."""
    target = unquote(urldefrag(href)[0])
    return posixpath.normpath(posixpath.join(base, target)) if target else ""
