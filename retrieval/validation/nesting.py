"""How deep JSON may nest: metadata, search filters, tool arguments, API request bodies.

Python's ``json`` module, Django's admin and DRF recurse once per level, so a value
nested a few thousand levels deep raises ``RecursionError`` (a 500) wherever it is
read or shown. Values are measured here without recursion and refused past
``RETRIEVAL["MAX_JSON_DEPTH"]`` with a message naming the limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from retrieval.conf import retrieval_settings


class TooDeepError(ValueError):
    """A JSON value nests deeper than ``MAX_JSON_DEPTH`` (or than the JSON parser can)."""


def max_json_depth() -> int:
    """Return the configured ``MAX_JSON_DEPTH``."""
    return int(retrieval_settings.MAX_JSON_DEPTH)


def too_deep_message(where: str, limit: int) -> str:
    """Return the error naming ``where`` nests past ``limit`` levels, and the setting."""
    return (
        f"{where} nests objects and arrays deeper than {limit} levels "
        f"(MAX_JSON_DEPTH is {max_json_depth()}); flatten it."
    )


def depth(value: Any, *, stop_after: int | None = None) -> int:
    """Return how many levels of objects and arrays ``value`` nests (a scalar: 0).

    Measured without recursion; with ``stop_after`` it stops, returning
    ``stop_after + 1``, as soon as the value is known to be deeper.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if stop_after is not None and deepest > stop_after:
            return stop_after + 1
        stack.extend((child, level + 1) for child in children if _is_container(child))
    return deepest


def loads(text: str | bytes, *, where: str, extra_levels: int = 0, **options: Any) -> Any:
    """Return ``json.loads(text)``, refusing a value nested past ``MAX_JSON_DEPTH``.

    Raise :class:`TooDeepError` naming ``where`` (the parser's own recursion limit
    included), and ``json.JSONDecodeError`` for text that is not JSON.
    """
    limit = max_json_depth() + extra_levels
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeepError(too_deep_message(where, limit)) from None
    refuse_too_deep(value, where, limit=limit)
    return value


def refuse_too_deep(value: Any, where: str, *, limit: int | None = None) -> None:
    """Raise :class:`TooDeepError` if ``value`` nests deeper than ``limit`` (MAX_JSON_DEPTH)."""
    limit = max_json_depth() if limit is None else limit
    if depth(value, stop_after=limit) > limit:
        raise TooDeepError(too_deep_message(where, limit))


def clipped(value: Any, levels: int) -> Any:
    """Return ``value`` with what nests past ``levels`` replaced by a note saying so.

    For showing values stored before the limit existed; recursion is bounded by ``levels``.
    """
    if not _is_container(value):
        return value
    if levels <= 0:
        return "… (nested deeper than this, not shown)"
    if isinstance(value, Mapping):
        return {str(key): clipped(item, levels - 1) for key, item in value.items()}
    return [clipped(item, levels - 1) for item in value]


def _is_container(value: Any) -> bool:
    return isinstance(value, Mapping | list | tuple)
