"""The parser interface: raw bytes of a file -> :class:`ParsedDocument`."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path, PurePath
from typing import ClassVar

from retrieval.exceptions import ParseError, ParserUnavailable
from retrieval.services.types import ParsedDocument


class BaseParser(ABC):
    """Turn a file's bytes into text with structure (pages, headings).

    Subclasses list the MIME types and extensions they accept; the registry picks
    the first configured parser that accepts a file. ``parse`` raises
    :class:`~retrieval.exceptions.ParseError` with a reason a person can act on
    when the bytes are corrupt or empty.
    """

    alias: str = ""
    mime_types: ClassVar[tuple[str, ...]] = ()
    extensions: ClassVar[tuple[str, ...]] = ()  # lower case, with the dot: ".md"

    def accepts(self, *, mime_type: str | None = None, filename: str | None = None) -> bool:
        """Return whether this parser reads files of this MIME type or name."""
        if mime_type and mime_type.split(";")[0].strip().lower() in self.mime_types:
            return True
        if filename and PurePath(filename).suffix.lower() in self.extensions:
            return True
        return False

    def unavailable(self) -> str:
        """Return why this parser cannot run here (a missing extra, naming it), else ``""``."""
        return ""

    def check_readable(self, data: bytes, label: str) -> None:
        """Raise ``ParserUnavailable`` naming what to install if this parser cannot run here,
        ``ParseError`` if ``data`` is empty (``label`` names the file)."""
        if reason := self.unavailable():
            raise ParserUnavailable(f"Cannot parse {label}: {reason}")
        if not data.strip():
            raise ParseError(f"Cannot parse {label}: it is empty.")

    @property
    def default_mime_type(self) -> str:
        return self.mime_types[0] if self.mime_types else "application/octet-stream"

    def parse(
        self, source: bytes | str | os.PathLike[str], *, filename: str | None = None
    ) -> ParsedDocument:
        """Return the document's text, title and sections.

        ``source`` is the file's bytes, its text (``str``, read as UTF-8) or a path to
        read (whose name is the ``filename`` unless one is given).
        """
        if isinstance(source, os.PathLike):
            path = Path(source)
            data = path.read_bytes()
            filename = path.name if filename is None else filename
        elif isinstance(source, str):
            data = source.encode("utf-8", errors="surrogatepass")
        elif isinstance(source, bytes | bytearray | memoryview):
            data = bytes(source)
        else:
            raise TypeError(f"parse() takes bytes, a str or a path, not {type(source).__name__}.")
        return self._parse(data, filename=filename)

    @abstractmethod
    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return the document's text, title and sections from the file's bytes."""
