"""BM25 term bounds of the scopes a site declares (``retrieval/sql/bm25_scope_bounds.sql``).

DRAFT (stop 52): not wired into the planner, not tested.

A declared scope (``Collection.scope_indexes``: ``{"access": token}`` or ``{"metadata":
{...}}``) whose marks are exactly its chunks keeps, per term, the largest tf, smallest
``dl / tf`` and shortest tf-1 chunk among its chunks. A search whose filters lie within
it (a reader of that one token; metadata containing the scope's) ranks with these
bounds, which the collection's loosen: at 1M chunks the top-k function under a 10%
scope took 1.41x the open search with them, 1.80x without (README, scoped searches).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.db import connections

from retrieval.services.sparse.scoped import _has_leaf, _marked_exactly

# The scope's marks as a tsquery's text, which its chunks' rows match.
MARKS_SQL = "SELECT retrieval_bm25_scope_query(%s, NULL, NULL, %s::text[], %s::jsonb)::text"


def bounds_key(declared: Mapping[str, Any]) -> str | None:
    """Return the key of a declared scope's bounds (its declaration as sorted JSON), or
    ``None`` when its marks are not exactly its chunks (a metadata object holding an
    empty object or array, or an object inside an array): such a scope keeps none."""
    metadata = declared.get("metadata")
    if metadata is not None and not (_has_leaf(metadata) and _marked_exactly(metadata)):
        return None
    return json.dumps(declared, sort_keys=True)


def declare_bounds(collection_id: int, declared: Mapping[str, Any], *, using: str) -> None:
    """Keep the declared scope's bounds from now on, filled from its chunks (under the
    collection's writer lock: no write is missed)."""
    key = bounds_key(declared)
    if key is None:
        return
    metadata = declared.get("metadata")
    tokens = [declared["access"]] if "access" in declared else None
    with connections[using].cursor() as cursor:
        cursor.execute(
            MARKS_SQL, [collection_id, tokens, None if metadata is None else json.dumps(metadata)]
        )
        marks = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO retrieval_bm25_scope (collection_id, scope, marks) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [collection_id, key, marks],
        )
        cursor.execute("SELECT retrieval_bm25_scope_bounds_fill(%s, %s)", [collection_id, key])


def remove_bounds(collection_id: int, declared: Mapping[str, Any], *, using: str) -> None:
    """Stop keeping the declared scope's bounds."""
    key = bounds_key(declared)
    if key is None:
        return
    with connections[using].cursor() as cursor:
        for table in ("retrieval_bm25_scope_term", "retrieval_bm25_scope"):
            cursor.execute(
                f"DELETE FROM {table} WHERE collection_id = %s AND scope = %s",
                [collection_id, key],
            )
