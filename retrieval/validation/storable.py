"""What the app refuses to store: a NUL character, which PostgreSQL cannot hold in text or
jsonb (\\u0000), and JSON nested deeper than ``MAX_JSON_DEPTH`` (see :mod:`.nesting`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from retrieval.validation.nesting import max_json_depth, too_deep_message

NUL = "\x00"


def _unstorable_at(value: Any, where: str, limit: int) -> str | None:
    """Return why ``value`` (a string, or JSON of objects and arrays) cannot be stored, or None.

    Walked without recursion, depth first in order, so the first NUL is the one named.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, level = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                return f"{path} contains a NUL character (\\u0000), which PostgreSQL cannot store."
            continue
        if isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                if NUL in str(key):
                    return (
                        f"{path}: key {str(key)!r} contains a NUL character (\\u0000), "
                        "which PostgreSQL cannot store."
                    )
                children.append((child, f"{path}.{key}"))
        elif isinstance(item, list | tuple):
            children = [(child, f"{path}[{i}]") for i, child in enumerate(item)]
        else:
            continue
        if level + 1 > limit:
            return too_deep_message(where, limit)
        stack.extend((child, child_path, level + 1) for child, child_path in reversed(children))
    return None


def refuse_unstorable(
    value: Any, where: str, error: Callable[[str], Exception] = ValueError
) -> None:
    """Raise ``error(message)`` naming where ``value`` holds a NUL or nests too deep."""
    found = _unstorable_at(value, where, max_json_depth())
    if found:
        raise error(found)


def validate_storable_metadata(value: Any) -> None:
    """Model field validator (admin and model forms): refuse a NUL, or nesting too deep."""
    from django.core.exceptions import ValidationError

    refuse_unstorable(value, "metadata", ValidationError)
