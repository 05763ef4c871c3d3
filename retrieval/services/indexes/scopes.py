"""Declared scopes (``Collection.scope_indexes``): which searches they serve, in any index.

A collection may declare scopes, ``{"access": token}`` or ``{"metadata": {...}}``, whose
chunks get indexes of their own (pgvector builds an HNSW graph and a GIN index of the BM25
lexemes each: ``indexes/pgvector/ddl.py``). What a declaration means is the same for every
index and retriever: its SQL condition, the filters that imply it, and a reader's scope
split into one part per declared token. The dense and BM25 retrievers read it here, so
neither reaches into a backend.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.validation.storable import refuse_unstorable


def checked_scope(declared: Mapping[str, Any]) -> dict[str, Any]:
    """Return a scope declaration, refusing one that is not ``{"access": token}`` or
    ``{"metadata": object}`` (``ValueError``)."""
    if not isinstance(declared, Mapping) or len(declared) != 1:
        raise ValueError(
            f'A scope is {{"access": "<token>"}} or {{"metadata": {{...}}}}, not {declared!r}.'
        )
    ((kind, value),) = declared.items()
    if kind == "access" and isinstance(value, str) and value:
        refuse_unstorable(value, "scope access token", ValueError)
        return {"access": value}
    if kind == "metadata" and isinstance(value, Mapping) and value:
        refuse_unstorable(value, "scope metadata", ValueError)
        return {"metadata": json.loads(json.dumps(value))}
    raise ValueError(
        'A scope is {"access": "<token>"} or a non-empty {"metadata": {...}}, not '
        f"{dict(declared)!r}."
    )


def declared_marks(declared: Mapping[str, Any]) -> tuple[list[str] | None, str | None]:
    """Return a declared scope's access tokens and metadata (JSON), as the BM25 index's
    scope marks take them (``retrieval_bm25_scope_query``)."""
    if "access" in declared:
        return [declared["access"]], None
    return None, json.dumps(declared["metadata"])


def scope_condition(declared: Mapping[str, Any], alias: str = "") -> str:
    """Return a declared scope's SQL condition, its value written out (as the space's), for
    a statement executed with parameters (``%`` doubled)."""
    column = f"{alias}." if alias else ""
    if "access" in declared:
        return f"{column}access ? {sql_literal(declared['access'])}"
    return f"{column}metadata @> {sql_literal(json.dumps(declared['metadata']))}::jsonb"


def sql_literal(value: str) -> str:
    """Quote ``value`` as an SQL string in a statement with parameters: quotes doubled
    (standard_conforming_strings, PostgreSQL's default), and ``%`` doubled for the driver."""
    return "'" + value.replace("'", "''").replace("%", "%%") + "'"


def scope_parts(collection: Collection, filters: Filters | Mapping | None) -> list[Filters]:
    """Split a reader's scope into one part per access token when one of them has a
    declared scope index: each part then walks its token's graph (or is planned on its
    own), and their results merge. Otherwise the filters are one part."""
    filters = Filters.parse(filters)
    reader = filters.reader
    declared = {scope["access"] for scope in collection.scope_indexes if "access" in scope}
    if reader is None or len(reader.tokens) < 2 or not declared.intersection(reader.tokens):
        return [filters]
    filters = filters.resolved(collection.pk)  # named documents looked up once, not per part
    apart = [(token,) for token in reader.tokens if token in declared]
    rest = tuple(token for token in reader.tokens if token not in declared)
    return [
        replace(filters, reader=replace(reader, tokens=tokens))
        for tokens in [*apart, rest]
        if tokens
    ]


def is_whole_scope(filters: Filters, declared: Mapping[str, Any]) -> bool:
    """True if ``filters`` allow exactly the declared ``declared``'s chunks."""
    if filters.document_ids is not None or filters.documents is not None:
        return False
    if "metadata" in declared:
        return filters.documents_within is None and states_scope(filters, declared)
    reader = filters.reader
    return (
        not filters.metadata
        and reader is not None
        and reader.others is None
        and reader.tokens == (declared["access"],)
    )


def states_scope(filters: Filters, declared: Mapping[str, Any]) -> bool:
    """True if the filters' metadata condition is a metadata scope's, as its index's
    predicate has it (the same JSON, which the planner compares)."""
    return "metadata" in declared and json.dumps(filters.metadata, sort_keys=True) == json.dumps(
        declared["metadata"], sort_keys=True
    )


def indexed_scope(collection: Collection, filters: Filters) -> dict[str, Any] | None:
    """Return the first declared scope these filters imply (a reader of that one token;
    metadata containing the scope's), whose index a walk can use; else ``None``."""
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
