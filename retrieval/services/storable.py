"""What PostgreSQL cannot store: a NUL character, in text or in JSON (jsonb refuses \\u0000)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

NUL = "\x00"


def _nul_at(value: Any, where: str) -> str | None:
    """Return where in ``value`` (a string, or JSON of objects and arrays) a NUL is, or None."""
    if isinstance(value, str):
        return where if NUL in value else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if NUL in str(key):
                return f"{where}: key {str(key)!r}"
            found = _nul_at(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            found = _nul_at(item, f"{where}[{position}]")
            if found:
                return found
    return None


def refuse_nul(value: Any, where: str, error: Callable[[str], Exception] = ValueError) -> None:
    """Raise ``error(message)`` naming where ``value`` holds a NUL character, if it does."""
    found = _nul_at(value, where)
    if found:
        raise error(f"{found} contains a NUL character (\\u0000), which PostgreSQL cannot store.")


def validate_storable_metadata(value: Any) -> None:
    """Model field validator (admin and model forms): refuse a value holding a NUL."""
    from django.core.exceptions import ValidationError

    refuse_nul(value, "metadata", ValidationError)
