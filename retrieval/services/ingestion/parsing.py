"""Pick the configured parser for a file and parse it."""

from __future__ import annotations

import mimetypes
from pathlib import PurePath
from typing import IO

from retrieval.exceptions import ParseError, ParserUnavailable, UnsupportedFileType
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.sniffing import describe, sniff
from retrieval.services.registry import parsers
from retrieval.services.types import ParsedDocument


def parser_for(
    *, mime_type: str | None = None, filename: str | None = None, data: bytes | None = None
) -> BaseParser:
    """Return the first configured parser accepting this MIME type, else this file name.

    Given the file's ``data``, its bytes decide where they can (:func:`sniff`): a file
    whose signature says it is another kind than its name or MIME type claims is read by
    the parser of what it is, or refused (``UnsupportedFileType``) naming both when no
    parser reads that. Raise ``ParserUnavailable`` (an ``UnsupportedFileType``) naming the
    extra to install when the chosen parser's optional dependency is missing.
    """
    actual = sniff(data) if data is not None else None
    if actual is None:
        parser = _accepting(mime_type=mime_type, filename=filename)
    else:
        parser = _by_content(actual, mime_type=mime_type, filename=filename)
    if reason := parser.unavailable():
        raise ParserUnavailable(f"Cannot read {filename or 'this file'}: {reason}")
    return parser


def parser_for_upload(upload: IO[bytes], *, mime_type: str | None) -> BaseParser:
    """Return the parser for an uploaded file (within ``MAX_UPLOAD_BYTES``), judged by its
    name, MIME type and bytes; the file is left at its start."""
    upload.seek(0)
    data = upload.read()
    upload.seek(0)
    return parser_for(mime_type=mime_type, filename=getattr(upload, "name", None), data=data)


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


def _by_content(actual: str, *, mime_type: str | None, filename: str | None) -> BaseParser:
    """Return the parser for bytes whose signature says ``actual``: the claimed one if it
    reads that kind, else the first configured parser that does."""
    try:
        claimed = _accepting(mime_type=mime_type, filename=filename)
    except UnsupportedFileType as unsupported:
        claimed, refusal = None, unsupported
    if claimed is not None and claimed.accepts(mime_type=actual):
        return claimed
    for alias in parsers.configs():
        if parsers[alias].accepts(mime_type=actual):
            return parsers[alias]
    if claimed is None:  # neither its name nor its bytes are a kind read here
        raise refusal
    label = filename or "this file"
    suffix = PurePath(filename or "").suffix
    claim = f" (its name says {suffix})" if suffix else ""
    raise UnsupportedFileType(
        f"Cannot read {label}: its content is {describe(actual)}{claim}, "
        "which no configured parser reads."
    )


def parse(
    data: bytes, *, filename: str | None = None, mime_type: str | None = None
) -> tuple[ParsedDocument, BaseParser]:
    """Parse ``data`` with the parser chosen for it; raise ``ParseError`` with a reason."""
    parser = parser_for(mime_type=mime_type, filename=filename, data=data)
    try:
        return parser.parse(data, filename=filename), parser
    except ParseError:
        raise
    except Exception as e:  # a parser library's own error: keep the reason, name the file
        raise ParseError(
            f"{parser.__class__.__name__} could not read {filename or 'the file'}: {e}"
        ) from e
