"""JSON and JSON Lines files: one ``path: value`` line per leaf, in document order."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any, ClassVar

from retrieval.exceptions import ParseError
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.layout import TextBuilder, clip_title, file_label, stem_title
from retrieval.services.types import ParsedDocument

JSON_LINES_EXTENSIONS = (".jsonl", ".ndjson")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


class _Object(list[tuple[str, Any]]):
    """A JSON object as its ``(key, value)`` pairs, so order and repeated keys survive."""


class _Number(str):
    """A JSON number exactly as the source wrote it."""


class JsonParser(BaseParser):
    """Flatten JSON, or JSON Lines, to ``user.name: Alice`` lines, one section per top key."""

    mime_types: ClassVar[tuple[str, ...]] = (
        "application/json",
        "application/x-ndjson",
        "application/jsonl",
    )
    extensions: ClassVar[tuple[str, ...]] = (".json", *JSON_LINES_EXTENSIONS)

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        """Return one line per leaf value; JSON Lines records are prefixed ``[i]``."""
        label = file_label(filename)
        source = _decode(data, label)
        if not source.strip():
            raise ParseError(f"Cannot parse {label}: it is empty.")
        try:
            if filename and PurePath(filename).suffix.lower() in JSON_LINES_EXTENSIONS:
                return _parse_lines(source, label, filename)
            return _parse_document(source, label, filename)
        except RecursionError as e:
            raise ParseError(f"Cannot parse {label}: it is nested too deeply.") from e


def _parse_document(source: str, label: str, filename: str | None) -> ParsedDocument:
    """Return a JSON document as leaves, one section per top-level key."""
    try:
        value = _load(source)
    except json.JSONDecodeError as e:
        # A .json file holding one record per line is common; read it as JSON Lines.
        if e.msg == "Extra data":
            try:
                return _parse_lines(source, label, filename)
            except ParseError:
                pass
        raise ParseError(
            f"Cannot parse {label}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}."
        ) from e
    builder = TextBuilder()
    if isinstance(value, _Object) and value:
        for key, child in value:
            builder.open_section(heading_path=(key or '""',))
            _write_leaves(builder, child, _join_key("", key))
    else:
        _write_leaves(builder, value, "")
    text, sections = builder.build()
    return ParsedDocument(
        text=text,
        title=_title(value) or stem_title(filename),
        sections=sections,
        metadata={"format": "json"},
    )


def _parse_lines(source: str, label: str, filename: str | None) -> ParsedDocument:
    """Return a JSON Lines file as leaves prefixed by record, one section per record."""
    builder = TextBuilder()
    records = 0
    for line_number, line in enumerate(source.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = _load(line)
        except json.JSONDecodeError as e:
            raise ParseError(
                f"Cannot parse {label}: line {line_number} is not valid JSON "
                f"(column {e.colno}: {e.msg})."
            ) from e
        path = f"[{records}]"
        builder.open_section(heading_path=(path,))
        _write_leaves(builder, value, path)
        records += 1
    text, sections = builder.build()
    return ParsedDocument(
        text=text,
        title=stem_title(filename),
        sections=sections,
        metadata={"format": "jsonl", "records": records},
    )


def _decode(data: bytes, label: str) -> str:
    encoding = json.detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ParseError(
            f"Cannot parse {label}: it is not valid {encoding} text (byte {e.start})."
        ) from e


def _load(source: str) -> Any:
    return json.loads(
        source,
        object_pairs_hook=_Object,
        parse_int=_Number,
        parse_float=_Number,
        parse_constant=_Number,
    )


def _write_leaves(builder: TextBuilder, value: Any, path: str) -> None:
    for line in _leaf_lines(value, path):
        builder.line_break()
        builder.write_lines(line)


def _leaf_lines(value: Any, path: str) -> Iterator[str]:
    """Yield ``path: value`` for every scalar, empty object and empty array in ``value``."""
    if isinstance(value, _Object):
        if not value:
            yield _leaf(path, "{}")
        for key, child in value:
            yield from _leaf_lines(child, _join_key(path, key))
    elif isinstance(value, list):
        if not value:
            yield _leaf(path, "[]")
        for index, child in enumerate(value):
            yield from _leaf_lines(child, f"{path}[{index}]")
    else:
        yield _leaf(path, _scalar(value))


def _leaf(path: str, value: str) -> str:
    return f"{path}: {value}" if path else value


def _join_key(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _scalar(value: str | bool | None) -> str:
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return _LINE_BREAKS.sub(" ", value) if value.strip() else json.dumps(value)


def _title(value: Any) -> str:
    """Return the top-level ``title``, else ``name``, when it is a non-empty string."""
    if not isinstance(value, _Object):
        return ""
    for wanted in ("title", "name"):
        for key, child in value:
            if key == wanted and type(child) is str and (title := clip_title(child)):
                return title
    return ""
