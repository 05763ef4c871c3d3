"""What a model's JSON answer may be, and reading it safely.

A schema's bounds give the longest answer it allows (:func:`answer_token_bound`), so
a structured call asks for enough ``max_tokens``; answers are parsed without
``NaN``/``Infinity`` and cleaned of what PostgreSQL and JSON responses cannot hold;
ids that index a list are read by :func:`valid_indices`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: The most characters a JSON number takes as a double prints (``repr``): more digits
#: than a double holds mean nothing more.
NUMBER_CHARS = 24
#: Room for whitespace around the value and a closing newline.
SLACK_CHARS = 16
#: The most characters of a model's answer that go into a search query, a trace or an
#: error message: a server that ignores ``max_tokens`` can answer 200,000 characters,
#: which were searched as the query and copied into every failed chunk's error.
ANSWER_CHARS = 2000
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def answer_length(schema: Mapping[str, Any]) -> int | None:
    """Return the most characters a JSON value valid under ``schema`` takes, written as
    ``json.dumps`` writes it (``", "`` and ``": "``), or ``None`` if nothing bounds it.

    Objects count their declared properties; arrays need ``maxItems``, strings
    ``maxLength`` (or an ``enum``); integers count their ``minimum``/``maximum`` digits
    plus ``.0`` (JSON Schema takes ``1.0`` for an integer).
    """
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"])
    if "const" in schema:
        return len(json.dumps(schema["const"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            lengths = [answer_length(branch) for branch in schema[key]]
            return None if None in lengths else max(lengths)  # type: ignore[type-var]
    kind = schema.get("type")
    if kind == "object":
        parts = [
            (answer_length(sub), len(json.dumps(name)) + 2)
            for name, sub in schema.get("properties", {}).items()
        ]
        if any(length is None for length, _ in parts):
            return None
        body = sum(length + key for length, key in parts)  # type: ignore[operator]
        return 2 + body + 2 * max(len(parts) - 1, 0)
    if kind == "array":
        items, count = answer_length(schema.get("items", {})), schema.get("maxItems")
        if items is None or count is None:
            return None
        return 2 + count * items + 2 * max(count - 1, 0)
    if kind == "string":
        return None if "maxLength" not in schema else schema["maxLength"] + 2
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is None or high is None:
            return None
        return max(len(str(int(low))), len(str(int(high)))) + 2
    if kind == "number":
        return NUMBER_CHARS
    if kind == "boolean":
        return 5
    if kind == "null":
        return 4
    return None


def answer_token_bound(schema: Mapping[str, Any]) -> int | None:
    """Return the ``max_tokens`` that fits any answer valid under ``schema``, at one token
    per character (what a model pays for strings like ``"1.0.3.4.1"``), or ``None``."""
    length = answer_length(schema)
    return None if length is None else length + SLACK_CHARS


def parse_answer(text: str, *, cleaned: bool = True) -> Any:
    """Return ``text`` parsed as JSON, cleaned (see :func:`clean`) unless ``cleaned`` is false.

    ``strict=False``: llama.cpp's JSON grammar lets raw control characters into
    strings. ``NaN`` and ``Infinity`` (which Python's parser accepts) and numbers too
    large for a double are refused with ``ValueError``.
    """
    data = json.loads(text, strict=False, parse_constant=_refuse, parse_float=_finite)
    return clean(data) if cleaned else data


def clean(value: Any) -> Any:
    """Return ``value`` with NUL characters dropped and lone surrogates replaced by U+FFFD
    in every string (PostgreSQL stores neither; a JSON response cannot encode the latter)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value.replace("\x00", ""))
    if isinstance(value, list):
        return [clean(item) for item in value]
    if isinstance(value, dict):
        return {clean(key): clean(item) for key, item in value.items()}
    return value


def excerpt(text: str, limit: int = ANSWER_CHARS) -> str:
    """Return ``text`` cut to ``limit`` characters, saying how long it was if it was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut from {len(text):,} characters]"


def unit_interval(value: float) -> float:
    """Return ``value`` clamped to [0, 1] as a float, compared before it is converted: an
    integer of 400 digits (a valid JSON number) is too large for a float."""
    return float(min(1.0, max(0.0, value)))


def valid_indices(values: Iterable[Any], size: int) -> tuple[list[int], list[Any]]:
    """Return the distinct indices into a list of ``size`` that ``values`` name, in order,
    and the values ignored (out of range, repeated, or not integers).

    An integer-valued float (``1.0``, which JSON Schema counts as an integer) is read
    as that integer; booleans are not indices.
    """
    kept: list[int] = []
    ignored: list[Any] = []
    for value in values:
        index = as_index(value)
        if index is None or not 0 <= index < size or index in kept:
            ignored.append(value)
        else:
            kept.append(index)
    return kept, ignored


def as_index(value: Any) -> int | None:
    """Return ``value`` as an ``int`` if it is one (``3`` or ``3.0``), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is too large for a number")
    return number
