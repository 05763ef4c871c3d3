"""The scopes a site declares (``Collection.scope_indexes``) that a search's filters lie
within: a pgvector collection walks such a scope's own graph, BM25 ranks with its own
term bounds."""

from __future__ import annotations

from typing import Any

from retrieval.models import Collection
from retrieval.services.query.filters import Filters


def implied_scope(collection: Collection, filters: Filters) -> dict[str, Any] | None:
    """Return the first declared scope holding every chunk ``filters`` allow (a reader of
    that one token; metadata containing the scope's), else ``None``."""
    for scope in collection.scope_indexes:
        if "access" in scope:
            if filters.reader is not None and filters.reader.tokens == (scope["access"],):
                return scope
        elif filters.metadata and json_contains(filters.metadata, scope["metadata"]):
            return scope
    return None


def json_contains(outer: Any, inner: Any) -> bool:
    """PostgreSQL's ``jsonb @>`` of two JSON objects: every key of ``inner`` in ``outer``
    with a value it contains; every element of an inner array contained by one of the
    outer array's; scalars equal (numbers by value, never booleans)."""
    if isinstance(inner, dict):
        return isinstance(outer, dict) and all(
            key in outer and json_contains(outer[key], value) for key, value in inner.items()
        )
    if isinstance(inner, list):
        return isinstance(outer, list) and all(
            any(json_contains(candidate, element) for candidate in outer) for element in inner
        )
    if isinstance(outer, dict | list) or isinstance(outer, bool) != isinstance(inner, bool):
        return False
    numbers = isinstance(outer, int | float) and isinstance(inner, int | float)
    return (numbers or type(outer) is type(inner)) and outer == inner
