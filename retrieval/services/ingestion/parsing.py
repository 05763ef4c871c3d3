"""Pick the configured parser for a file and parse it."""

from __future__ import annotations

import mimetypes

from retrieval.exceptions import ParseError, ParserUnavailable, UnsupportedFileType
from retrieval.services.parsers.base import BaseParser
from retrieval.services.registry import parsers
from retrieval.services.types import ParsedDocument


def parser_for(*, mime_type: str | None = None, filename: str | None = None) -> BaseParser:
    """Return the first configured parser accepting this MIME type, else this file name.

    Raise ``ParserUnavailable`` (an ``UnsupportedFileType``) naming the extra to install
    when that parser's optional dependency is missing.
    """
    parser = _accepting(mime_type=mime_type, filename=filename)
    if reason := parser.unavailable():
        raise ParserUnavailable(f"Cannot read {filename or 'this file'}: {reason}")
    return parser


def _accepting(*, mime_type: str | None, filename: str | None) -> BaseParser:
    configured: list[BaseParser] = [parsers[alias] for alias in parsers.configs()]
    if mime_type and mime_type != "application/octet-stream":
        for parser in configured:
            if parser.accepts(mime_type=mime_type):
                return parser
    for parser in configured:
        if parser.accepts(filename=filename):
            return parser
    guessed = mimetypes.guess_type(filename or "")[0]
    if guessed:
        for parser in configured:
            if parser.accepts(mime_type=guessed):
                return parser
    accepted = sorted({ext for parser in configured for ext in parser.extensions})
    raise UnsupportedFileType(
        f"No parser accepts {filename or 'this file'!s}"
        f"{f' ({mime_type})' if mime_type else ''}; supported: {', '.join(accepted)}."
    )


def parse(
    data: bytes, *, filename: str | None = None, mime_type: str | None = None
) -> tuple[ParsedDocument, BaseParser]:
    """Parse ``data`` with the parser chosen for it; raise ``ParseError`` with a reason."""
    parser = parser_for(mime_type=mime_type, filename=filename)
    try:
        return parser.parse(data, filename=filename), parser
    except ParseError:
        raise
    except Exception as e:  # a parser library's own error: keep the reason, name the file
        raise ParseError(
            f"{parser.__class__.__name__} could not read {filename or 'the file'}: {e}"
        ) from e
