"""pgvector's indexes of a collection: their names, definitions and builds.

Each collection has a partial HNSW index over ``embedding::vector(n)`` (the table holds
several dimensions), of the rows whose vectors have ``n`` dimensions (``space_condition``),
and each scope it declares an HNSW graph of the scope's vectors and a GIN index of its
chunks' BM25 lexemes. The planner repeats the conditions written here, so that
PostgreSQL matches a query to an index's predicate.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import DatabaseError, connection

from retrieval.models import Collection
from retrieval.services.indexes.scopes import declared_marks, scope_condition, sql_literal

#: HNSW build parameters (pgvector's defaults; measured in ARCHITECTURE.md): the index's
#: ``m`` and ``ef_construction`` OPTIONS, for the graphs it builds from then on.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: pgvector's ranges for them (and ``ef_construction`` at least ``2 * m``).
HNSW_M_RANGE = (2, 100)
HNSW_EF_CONSTRUCTION_RANGE = (4, 1000)

#: SQLSTATE of "cannot CREATE INDEX ... because it has pending trigger events".
PENDING_TRIGGER_EVENTS = "55006"
#: The name ending of the copy a REINDEX CONCURRENTLY builds (``_ccnew``) or of the index it
#: replaces (``_ccold``): left beside the index, invalid, if the REINDEX fails.
REINDEX_LEFTOVER_SUFFIX = "_cc(new|old)[0-9]*"
REINDEX_LEFTOVER = re.compile(f"{REINDEX_LEFTOVER_SUFFIX}$")


def vector_index_name(collection_id: int) -> str:
    return f"retrieval_chunk_hnsw_c{int(collection_id)}"


def scope_index_name(collection_id: int, declared: Mapping[str, Any]) -> str:
    """Return the name of a declared scope's HNSW index (``retrieval_scope_index``)."""
    return f"{vector_index_name(collection_id)}_s{_digest(declared)}"


def lexeme_index_name(collection_id: int, declared: Mapping[str, Any]) -> str:
    """Return the name of a declared scope's GIN index of its chunks' BM25 lexemes."""
    return f"retrieval_bm25_chunk_c{int(collection_id)}_s{_digest(declared)}"


def _digest(declared: Mapping[str, Any]) -> str:
    return hashlib.md5(json.dumps(declared, sort_keys=True).encode()).hexdigest()[:12]


def check_graph_options(m: int, ef_construction: int) -> None:
    """Refuse HNSW build parameters pgvector would refuse (``ValueError``)."""
    for name, value, (low, high) in (
        ("m", m, HNSW_M_RANGE),
        ("ef_construction", ef_construction, HNSW_EF_CONSTRUCTION_RANGE),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer from {low} to {high}, not {value!r}.")
    if ef_construction < 2 * m:
        raise ValueError(
            f"ef_construction must be at least twice m ({2 * m}), not {ef_construction}."
        )


def create_indexes(
    collection: Collection, names: Sequence[str], graph_options: str, *, concurrently: bool
) -> None:
    """Create the collection's indexes named ``names`` (``missing_indexes``): its HNSW
    index, its scopes' HNSW indexes (built ``WITH (graph_options)``) and GIN indexes of their
    chunks' BM25 lexemes. An invalid index of the same name, left by a concurrent build
    that failed, is dropped first; a concurrent build that fails drops its own."""
    dimensions = int(collection.dimensions)
    hnsw = (
        "ON retrieval_chunk "
        f"USING hnsw ((embedding::vector({dimensions})) vector_cosine_ops) "
        f"WITH ({graph_options}) WHERE "
    )
    definitions = {vector_index_name(collection.pk): hnsw + space_condition(collection)}
    how = concurrently_keyword(concurrently)
    with connection.cursor() as cursor:
        for scope in collection.scope_indexes:
            definitions[scope_index_name(collection.pk, scope)] = (
                f"{hnsw}{space_condition(collection)} AND {scope_condition(scope)}"
            )
            # The top-k function's look-ups under the scope hold these marks as a constant.
            cursor.execute(
                "SELECT retrieval_bm25_scope_query(%s, NULL, NULL, %s::text[], %s::jsonb)::text",
                [collection.pk, *declared_marks(scope)],
            )
            definitions[lexeme_index_name(collection.pk, scope)] = (
                "ON retrieval_bm25_chunk USING gin (lexemes) WITH (fastupdate = off) "
                f"WHERE lexemes @@ {sql_literal(cursor.fetchone()[0])}::tsquery"
            )
        for name in names:
            if _build_under_way(cursor, name):  # another session's: searches scan till it ends
                continue
            cursor.execute(f"DROP INDEX {how}IF EXISTS {name}")
            try:
                # No parameters: the scope's ``%`` are doubled for the driver.
                cursor.execute(f"CREATE INDEX {how}IF NOT EXISTS {name} {definitions[name]}", [])
            except DatabaseError:
                if concurrently:  # PostgreSQL leaves the failed build, invalid
                    cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                raise


def concurrently_keyword(concurrently: bool) -> str:
    return "CONCURRENTLY " if concurrently else ""


def _build_under_way(cursor, name: str) -> bool:
    """Whether a session is building index ``name`` (invalid until it is done)."""
    cursor.execute(
        "SELECT EXISTS (SELECT FROM pg_stat_progress_create_index "
        "WHERE index_relid = to_regclass(%s) AND pid <> pg_backend_pid())",
        [name],
    )
    return cursor.fetchone()[0]


def missing_indexes(collection: Collection) -> list[str]:
    """Return the names of the collection's indexes not built yet (``create_indexes``),
    or built invalid: a concurrent build that failed, or one still under way."""
    names = [vector_index_name(collection.pk)]
    for scope in collection.scope_indexes:
        names += [scope_index_name(collection.pk, scope), lexeme_index_name(collection.pk, scope)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM unnest(%s::text[]) AS name WHERE NOT EXISTS "
            "(SELECT FROM pg_index WHERE indexrelid = to_regclass(name) AND indisvalid)",
            [names],
        )
        missing = {row[0] for row in cursor.fetchall()}
    return [name for name in names if name in missing]


def existing_indexes(cursor, collection_id: int, *, leftovers: bool = False) -> list[str]:
    """Return the names of a collection's HNSW indexes (its own and its scopes') and its
    scopes' GIN indexes of BM25 lexemes; with ``leftovers``, also the copies a concurrent
    REINDEX that failed left beside them (``REINDEX_LEFTOVER``)."""
    leftover = REINDEX_LEFTOVER_SUFFIX
    cursor.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'retrieval_chunk' "
        "AND indexname ~ %s OR tablename = 'retrieval_bm25_chunk' AND indexname ~ %s "
        "ORDER BY indexname",
        [
            f"^{vector_index_name(collection_id)}(_s[0-9a-f]{{12}})?({leftover})?$",
            f"^retrieval_bm25_chunk_c{int(collection_id)}_s[0-9a-f]{{12}}({leftover})?$",
        ],
    )
    names = [row[0] for row in cursor.fetchall()]
    return [name for name in names if leftovers or not REINDEX_LEFTOVER.search(name)]


def existing_graphs(cursor, collection_id: int) -> list[str]:
    """Return the names of a collection's HNSW indexes: its own and its scopes'."""
    graphs = vector_index_name(collection_id)
    return [name for name in existing_indexes(cursor, collection_id) if name.startswith(graphs)]


def lock_declarations(collection: Collection) -> None:
    """Lock the collection's row and read its declared scopes afresh."""
    Collection.objects.select_for_update().filter(pk=collection.pk).exists()
    collection.refresh_from_db(fields=["scope_indexes"])


def space_condition(collection: Collection, alias: str = "") -> str:
    """Return the SQL condition of the collection's HNSW index: its rows, in its space.

    Written out, not bound, so that the planner can match it to the index's predicate.
    """
    column = f"{alias}." if alias else ""
    return (
        f"{column}collection_id = {int(collection.pk)} "
        f"AND vector_dims({column}embedding) = {int(collection.dimensions)}"
    )
