"""Zip containers of XML parts (Office Open XML, OpenDocument), opened within bounds.

The archive's directory is checked against the archive limits (``MAX_ARCHIVE_*``)
before any part is read, and ``zipfile`` stops reading a part at its declared size, so
reading a part costs at most what the limits allow. Every part is parsed by
``defusedxml`` with DTDs refused: no entity expansion ("billion laughs"), no external
entities; Office files never declare a DTD.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from abc import abstractmethod
from typing import Any
from xml.etree.ElementTree import Element

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.parsers.layout import file_label
from retrieval.services.types import ParsedDocument
from retrieval.validation.archives import ArchiveError, check_declared

#: XML elements read between checks of ``MAX_PARSE_SECONDS``.
ELEMENTS_PER_CHECK = 10_000
INSTALL_HINT = 'install the office extra: pip install "django-retrieval[office]"'
#: Office Open XML's relationships, and the attribute a part names another by.
RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"


def defusedxml_missing() -> str:
    """Return why XML containers cannot be read here (defusedxml missing), else ``""``."""
    try:
        import defusedxml  # noqa: F401
    except ImportError:
        return f"defusedxml is not installed, so its XML cannot be read safely; {INSTALL_HINT}."
    return ""


class PackageParser(BaseParser):
    """A parser of zip containers of XML parts, which needs the ``office`` extra."""

    def unavailable(self) -> str:
        """Name the extra to install when defusedxml is missing."""
        return defusedxml_missing()

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        label = file_label(filename)
        self.check_readable(data, label)
        return self.read(data, label=label, filename=filename)

    @abstractmethod
    def read(self, data: bytes, *, label: str, filename: str | None) -> ParsedDocument:
        """Return the document read from ``data``, a container not yet opened."""


class Package:
    """An opened zip container; ``kind`` names it in errors ("a Word document")."""

    def __init__(
        self,
        data: bytes,
        *,
        label: str,
        kind: str,
        parts: tuple[str, ...],
        budget: ParseBudget | None = None,
    ) -> None:
        self.label = label
        self.kind = kind
        self.budget = budget
        try:
            self.archive = zipfile.ZipFile(io.BytesIO(data))
            check_declared(self.archive)
        except zipfile.BadZipFile as e:
            raise ParseError(f"Cannot parse {label}: it is not {kind} (not a zip).") from e
        except ArchiveError as e:
            raise ParseError(f"Cannot parse {label}: {e}") from e
        self.names = set(self.archive.namelist())
        missing = [part for part in parts if part not in self.names]
        if missing:
            raise ParseError(
                f"Cannot parse {label}: it is not {kind} (the zip has no {' or '.join(missing)})."
            )

    def __enter__(self) -> Package:
        return self

    def __exit__(self, *exc: object) -> None:
        self.archive.close()

    def xml(self, name: str) -> Element | None:
        """Return part ``name`` parsed, or ``None`` if the container has no such part.

        The part is decompressed and parsed as a stream, ``MAX_PARSE_SECONDS`` checked
        every ``ELEMENTS_PER_CHECK`` elements: a part can hold millions of them.
        """
        from defusedxml import DefusedXmlException
        from defusedxml.ElementTree import ParseError as XmlSyntaxError
        from defusedxml.ElementTree import iterparse

        if name not in self.names:
            return None
        root = None
        try:
            with self.archive.open(name) as stream:
                events = iterparse(stream, events=("start",), forbid_dtd=True)
                for count, (_, element) in enumerate(events, start=1):
                    root = element if root is None else root
                    if count % ELEMENTS_PER_CHECK == 0 and self.budget is not None:
                        self.budget.check(f"while reading {name}")
        except ParseError:
            raise
        except DefusedXmlException as e:
            raise refused_xml(self.label, e) from e
        except XmlSyntaxError as e:
            raise ParseError(
                f"Cannot parse {self.label}: it is not readable {self.kind.split(' ', 1)[-1]} "
                f"(its part {name} is not well-formed XML: {e})."
            ) from e
        except Exception as e:  # zlib.error, a bad CRC, a truncated member ...
            raise ParseError(
                f"Cannot parse {self.label}: its part {name} cannot be read ({e})."
            ) from e
        return root

    def related(self, part: str, kind: str = "") -> dict[str, str]:
        """Return the parts ``part`` links to (Office Open XML), by relationship id; only
        those of relationship type ``kind`` (its last segment: "notesSlide") if given."""
        folder, name = posixpath.split(part)
        rels = self.xml(posixpath.join(folder, "_rels", f"{name}.rels"))
        targets: dict[str, str] = {}
        for rel in rels if rels is not None else ():
            target = rel.get("Target", "")
            if rel.get("TargetMode") == "External" or not target:
                continue
            if kind and rel.get("Type", "").rsplit("/", 1)[-1] != kind:
                continue
            path = target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
            targets[rel.get("Id", "")] = posixpath.normpath(path)
        return targets


def refused_xml(label: str, error: Any) -> ParseError:
    """Return the ParseError for XML that declares a DTD or entities (``error`` from defusedxml)."""
    return ParseError(
        f"Cannot parse {label}: its XML declares a DTD or entities, which are refused ({error!r})."
    )
