"""The default index: vectors ranked inside PostgreSQL by pgvector.

Vectors live in ``retrieval_chunk.embedding``, written with the chunks (so
:meth:`PgvectorIndex.write` has nothing to do); each collection has a partial
HNSW index over ``embedding::vector(n)`` (the table holds several dimensions),
of the rows whose vectors have ``n`` dimensions: a build never casts a vector of
another space, such as the row versions a re-embedding replaced, which a
transaction begun before it may still see. Queries repeat both conditions, so
the planner can use the index (and an index built before the second condition
existed as well).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from django.db import DatabaseError, OperationalError, connection, connections, transaction

from retrieval.models import Chunk, Collection
from retrieval.services.indexes.base import (
    BaseIndex,
    IndexFeatures,
    VectorRow,
    check_query_dimensions,
)
from retrieval.services.query.databases import search_database
from retrieval.services.query.filters import Filters, allowed_chunks, estimated_rows_each
from retrieval.services.types import ScoredChunk
from retrieval.services.validation.storable import refuse_unstorable

logger = logging.getLogger(__name__)

#: HNSW build parameters (pgvector's defaults; measured in ARCHITECTURE.md): the index's
#: ``m`` and ``ef_construction`` OPTIONS, for the graphs it builds from then on.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
#: pgvector's ranges for them (and ``ef_construction`` at least ``2 * m``).
HNSW_M_RANGE = (2, 100)
HNSW_EF_CONSTRUCTION_RANGE = (4, 1000)
#: pgvector's widest ``hnsw.ef_search`` (a wider one is an error of the search).
MAX_EF_SEARCH = 1000
#: A declared scope's own graph is walked with this many times the ``ef_search`` of the
#: collection's: it holds a fraction of the collection's vectors, so a wider list costs
#: less than widening the open search would. At 1M chunks (10% scopes' graphs, 200 queries)
#: 150 instead of 100 took recall@10 from 0.941-0.958 to 0.970; 200 reached 0.982-0.983
#: but took 1.85-2.07x the open search in the latency bench (README: scoped searches).
SCOPE_GRAPH_WIDENING = 1.5
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


class PgvectorIndex(BaseIndex):
    """Rank chunks by cosine distance with pgvector, in the site's database.

    Unfiltered queries use the collection's HNSW index. A filter matching at most
    ``exact_scan_limit`` chunks is answered by an exact scan of those chunks, a
    wider one by pgvector's iterative index scan in strict order, its ``ef_search``
    widened as the filter narrows (``ef_search / √share``, at most 4×), so a filtered
    query still returns ``top_k`` results whenever that many chunks match (a walk that
    stops short, at ``max_scan_tuples``, is redone by an exact scan). A declared scope's
    own graph is walked with a list ``SCOPE_GRAPH_WIDENING`` times wider. The filter's size
    is PostgreSQL's estimate, counted only when it lies just under the limit. Each of these can
    be overridden per query through ``rank``'s hints.

    ``m`` and ``ef_construction`` build the graphs: a wider construction list makes a
    better graph of a large, crowded collection, for a slower build and insert
    (``rebuild`` gives an existing graph the current ones).
    """

    features = IndexFeatures(transactional=True)

    def __init__(
        self,
        *,
        ef_search: int = 100,
        exact_scan_limit: int = 5000,
        max_scan_tuples: int = 20000,
        m: int = HNSW_M,
        ef_construction: int = HNSW_EF_CONSTRUCTION,
    ) -> None:
        check_search_options(ef_search, exact_scan_limit)
        check_graph_options(m, ef_construction)
        self.ef_search = ef_search
        self.exact_scan_limit = exact_scan_limit
        self.max_scan_tuples = max_scan_tuples
        self.m = m
        self.ef_construction = ef_construction

    @property
    def graph_options(self) -> str:
        """The HNSW build parameters, as ``WITH (...)`` and ``ALTER INDEX ... SET (...)``
        take them."""
        return f"m = {self.m}, ef_construction = {self.ef_construction}"

    # Spaces -----------------------------------------------------------------

    def ensure_space(self, collection: Collection) -> None:
        """Create the collection's partial HNSW index, and its declared scopes' indexes (an
        HNSW graph and a GIN index of the BM25 lexemes each), if missing or left invalid by
        a build that failed.

        Outside a transaction (a worker, a command, after a commit) they are built
        CONCURRENTLY: writes to the chunks of every collection go on during the build,
        which waits for transactions older than it to end. In a transaction they are
        built in it, holding the writes back until it commits. PostgreSQL refuses
        CREATE INDEX in a transaction that has pending deferred constraint checks (e.g.
        chunks written earlier in it): then the index is created once the transaction
        commits, and queries until then scan exactly.
        """
        missing = _missing_indexes(collection)
        if not missing:
            return
        if connection.get_autocommit():
            _create_indexes(collection, missing, self.graph_options, concurrently=True)
            return
        try:
            with transaction.atomic():
                _create_indexes(collection, missing, self.graph_options, concurrently=False)
        except OperationalError as e:
            if getattr(e.__cause__, "sqlstate", None) != PENDING_TRIGGER_EVENTS:
                raise
            transaction.on_commit(lambda: self.ensure_space(collection))

    def drop_space(self, collection_id: int) -> None:
        """Drop the collection's HNSW index and its scopes' indexes (found by name: the
        collection may be gone).

        Outside a transaction (after a collection's delete commits) CONCURRENTLY: a plain
        DROP INDEX queues for an exclusive lock on the chunks' table, and every search and
        write of every collection would queue behind it until the oldest ended.
        """
        how = _concurrently(connection.get_autocommit())
        with connection.cursor() as cursor:
            for name in _existing_indexes(cursor, collection_id, leftovers=True):
                cursor.execute(f"DROP INDEX {how}IF EXISTS {name}")

    def swap_space(self, collection: Collection) -> None:
        """Drop the old HNSW index; build the new one once the swap commits.

        Searches scan exactly until the index exists; ingestion retries creating it
        if this fails.
        """
        self.drop_space(collection.pk)
        transaction.on_commit(lambda: self._index_new_space(collection))

    def _index_new_space(self, collection: Collection) -> None:
        try:
            self.ensure_space(collection)
        except DatabaseError as e:
            logger.warning("HNSW index of %r not built yet: %s", collection.name, e)

    def rebuild(self, collection: Collection) -> None:
        """Rebuild the collection's HNSW indexes and its scopes' (REINDEX, the graphs with
        the index's current ``m`` and ``ef_construction``; or create those missing).

        Outside a transaction each is rebuilt CONCURRENTLY, writes going on meanwhile (as
        ``ensure_space`` builds); the old index answers searches until the new replaces it.
        """
        how = _concurrently(connection.get_autocommit())
        built = self.built_graph_options(collection)
        with connection.cursor() as cursor:
            for name in _existing_indexes(cursor, collection.pk, leftovers=True):
                if REINDEX_LEFTOVER.search(name):  # of a concurrent rebuild that failed
                    cursor.execute(f"DROP INDEX {how}IF EXISTS {name}")
                    continue
                # Only if they differ: the ALTER takes a lock on the index.
                if name in built and built[name] != (self.m, self.ef_construction):
                    cursor.execute(f"ALTER INDEX {name} SET ({self.graph_options})")
                cursor.execute(f"REINDEX INDEX {how}{name}")
        self.ensure_space(collection)

    def built_graph_options(self, collection: Collection) -> dict[str, tuple[int, int]]:
        """Return each of the collection's HNSW graphs (its own and its scopes') with the
        ``(m, ef_construction)`` it was built with."""
        with connection.cursor() as cursor:
            names = _existing_graphs(cursor, collection.pk)
            cursor.execute(
                "SELECT name, coalesce(c.reloptions, '{}') FROM unnest(%s::text[]) AS name "
                "JOIN pg_class c ON c.oid = to_regclass(name) ORDER BY name",
                [names],
            )
            rows = cursor.fetchall()
        built = {}
        for name, reloptions in rows:
            stored = dict(option.split("=", 1) for option in reloptions)
            # A graph built with no WITH (before the OPTIONS existed) has pgvector's defaults.
            m = int(stored.get("m", HNSW_M))
            built[name] = (m, int(stored.get("ef_construction", HNSW_EF_CONSTRUCTION)))
        return built

    def check_collection(self, collection: Collection) -> list:
        """Warn of graphs built with other ``m`` / ``ef_construction`` than the index's:
        changing the OPTIONS builds new graphs with them, not the existing ones."""
        from django.core.checks import Warning

        configured = (self.m, self.ef_construction)
        built = self.built_graph_options(collection)
        other = [
            f"{name} (m = {m}, ef_construction = {ef})"
            for name, (m, ef) in built.items()
            if (m, ef) != configured
        ]
        if not other:
            return []
        command = f"retrieval_sync_index --collection {shlex.quote(collection.name)} --rebuild"
        return [
            Warning(
                f"Collection {collection.name!r}: {len(other)} of its {len(built)} HNSW graphs "
                f"were built with other options than index {self.alias!r} has "
                f"({self.graph_options}): {', '.join(other)}.",
                hint=f"Run `manage.py {command}` (or the admin's rebuild action); until then "
                "searches walk the graphs as they were built.",
                obj=collection,
                id="retrieval.W003",
            )
        ]

    # Scope indexes ------------------------------------------------------------

    def add_scope_index(self, collection: Collection, declared: Mapping[str, Any]) -> str:
        """Declare a scope (``{"access": token}`` or ``{"metadata": {...}}``) on the
        collection and build its indexes now; return the HNSW index's name.

        A search whose filters imply the scope (a reader's token, metadata containing the
        scope's) walks that graph of the scope's vectors alone: as fast as an open search,
        where a narrow scope would otherwise be scanned row by row. A BM25 search ranks
        with the scope's GIN index of its chunks' lexemes (``sparse/scoped.py``).
        """
        declared = checked_scope(declared)
        with transaction.atomic():
            _lock_declarations(collection)
            if declared not in collection.scope_indexes:
                collection.scope_indexes = [*collection.scope_indexes, declared]
                collection.save(update_fields=["scope_indexes"])
        self.ensure_space(collection)
        return scope_index_name(collection.pk, declared)

    def remove_scope_index(self, collection: Collection, declared: Mapping[str, Any]) -> bool:
        """Drop a declared scope's indexes; return whether it was declared."""
        declared = checked_scope(declared)
        with transaction.atomic():
            _lock_declarations(collection)
            if declared not in collection.scope_indexes:
                return False
            collection.scope_indexes = [s for s in collection.scope_indexes if s != declared]
            collection.save(update_fields=["scope_indexes"])
            with connection.cursor() as cursor:
                for name in (
                    scope_index_name(collection.pk, declared),
                    lexeme_index_name(collection.pk, declared),
                ):
                    cursor.execute(f"DROP INDEX IF EXISTS {name}")
        return True

    # Vectors ----------------------------------------------------------------

    def write(self, collection: Collection, rows: Iterable[VectorRow]) -> None:
        """Nothing to do: the vectors are the chunks' own ``embedding`` column."""

    def delete(self, collection: Collection, chunk_ids: Sequence[int]) -> None:
        """Nothing to do: deleting the chunk rows deletes their vectors."""

    def ids(self, collection: Collection) -> set[int]:
        return set(
            Chunk.objects.filter(collection=collection, embedding__isnull=False).values_list(
                "pk", flat=True
            )
        )

    def count(self, collection: Collection) -> int:
        return Chunk.objects.filter(collection=collection, embedding__isnull=False).count()

    # Ranking ----------------------------------------------------------------

    def rank(
        self,
        vector: Sequence[float],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
        score_threshold: float | None = None,
        **hints: Any,
    ) -> list[ScoredChunk]:
        db = search_database()
        with transaction.atomic(using=db), connections[db].cursor() as cursor:
            parts, sql, params = self._planned_query(
                cursor, vector, collection, filters, top_k, score_threshold, hints
            )
            cursor.execute(sql, params)
            found: dict[int, list] = {i: [] for i in range(len(parts))}
            for part, chunk_id, distance in cursor.fetchall():
                found[part].append((chunk_id, distance))
            for i, part in enumerate(parts):
                if len(found[i]) >= top_k or part.exact:
                    continue
                if part.walked if part.walked is not None else self._walked(cursor):
                    # The filter allowed fewer than estimated and the walk stopped at
                    # max_scan_tuples, or it allows fewer than top_k: an exact scan is
                    # complete.
                    cursor.execute("SELECT set_config('enable_indexscan', 'off', true)")
                    cursor.execute(*part.query())
                    found[i] = [(chunk_id, distance) for _, chunk_id, distance in cursor.fetchall()]
        nearest: dict[int, float] = {}
        for rows in found.values():
            for chunk_id, distance in rows:
                nearest[chunk_id] = min(float(distance), nearest.get(chunk_id, math.inf))
        ranked = sorted(nearest.items(), key=lambda item: item[1])[:top_k]
        return [ScoredChunk(chunk_id, 1.0 - distance) for chunk_id, distance in ranked]

    def explain(
        self,
        vector: Sequence[float],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
        score_threshold: float | None = None,
        **hints: Any,
    ) -> str:
        """Return PostgreSQL's plan for the query :meth:`rank` runs."""
        db = search_database()
        with transaction.atomic(using=db), connections[db].cursor() as cursor:
            _, sql, params = self._planned_query(
                cursor, vector, collection, filters, top_k, score_threshold, hints
            )
            cursor.execute("EXPLAIN " + sql, params)
            return "\n".join(row[0] for row in cursor.fetchall())

    def _planned_query(
        self,
        cursor,
        vector: Sequence[float],
        collection: Collection,
        filters: Filters | Mapping | None,
        top_k: int,
        score_threshold: float | None,
        hints: dict[str, Any],
    ) -> tuple[list[PlannedPart], str, list]:
        """Plan a search's parts, set the transaction's planner settings for them; return
        the parts and the one statement ranking them (``part, id, distance`` rows)."""
        check_query_dimensions(vector, collection)
        literal = vector_literal(vector)
        parts = [
            self._planned_part(cursor, literal, collection, part, top_k, score_threshold, hints)
            for part in scope_parts(collection, filters)
        ]
        return parts, *_set_and_compose(cursor, parts)

    def _planned_part(
        self,
        cursor,
        literal: str,
        collection: Collection,
        filters: Filters | None,
        top_k: int,
        score_threshold: float | None,
        hints: dict[str, Any],
    ) -> PlannedPart:
        """Plan one part of a search for the query vector ``literal`` (:func:`vector_literal`):
        its query, and the planner settings it needs.

        The cast matches the collection's partial HNSW index.
        """
        ef_search = int(hints.get("ef_search") or self.ef_search)
        exact_scan_limit = hints.get("exact_scan_limit")
        exact_scan_limit = self.exact_scan_limit if exact_scan_limit is None else exact_scan_limit
        max_scan_tuples = int(hints.get("max_scan_tuples") or self.max_scan_tuples)
        filters = Filters.parse(filters)
        filter_conditions, filter_params = filters.sql("c", collection_id=collection.pk)
        scope = indexed_scope(collection, filters)
        # The scope's condition, written out beside the filter that implies it, so the
        # planner matches the scope index's predicate (a filter of the scope's own
        # metadata is that condition already).
        implied = [] if scope is None or states_scope(filters, scope) else [scope]
        where = " AND ".join(
            [
                space_condition(collection, "c"),
                *filter_conditions,
                *(scope_condition(s, "c") for s in implied),
            ]
        )
        where_params = list(filter_params)
        settings = {"hnsw.ef_search": str(min(max(ef_search, top_k), MAX_EF_SEARCH))}
        if top_k > MAX_EF_SEARCH:
            # One scan's list holds at most MAX_EF_SEARCH: the walk goes on past it.
            settings["hnsw.iterative_scan"] = "strict_order"
            settings["hnsw.max_scan_tuples"] = str(max(max_scan_tuples, 2 * top_k))
        if filter_conditions:
            if scope is not None:
                ef_search = min(math.ceil(SCOPE_GRAPH_WIDENING * ef_search), MAX_EF_SEARCH)
            if scope is not None and is_whole_scope(filters, scope):
                # The scope's own graph holds just what the filters allow: walked as an
                # open search of it, without an estimate (a short answer is redone exactly).
                share: float | None = 1.0
            else:
                share = self._allowed_share(
                    cursor,
                    collection,
                    filters,
                    filter_conditions,
                    where_params,
                    exact_scan_limit,
                    ef_search,
                    top_k,
                    within=None if scope is None else scope_condition(scope, "c"),
                )
            if share is None:
                settings["enable_indexscan"] = "off"
            else:
                settings["hnsw.ef_search"] = str(walk_ef_search(ef_search, share, top_k))
                settings["hnsw.iterative_scan"] = "strict_order"
                settings["hnsw.max_scan_tuples"] = str(max(max_scan_tuples, 2 * top_k))
                if scope is not None:
                    # The scope's graph, not a sort of the scope's rows: the second
                    # condition above halves the planner's estimate of them.
                    settings["enable_sort"] = "off"
        distance = f"(c.embedding::vector({int(collection.dimensions)})) <=> %s::vector"
        params = [literal, *where_params]
        if score_threshold is not None:
            where += f" AND {distance} <= %s"
            params += [literal, 1.0 - score_threshold]
        return PlannedPart(
            f"{distance} AS distance FROM retrieval_chunk c WHERE {where}", params, top_k, settings
        )

    @staticmethod
    def _walked(cursor) -> bool:
        """True if this transaction's query walked the index iteratively (a filtered one)."""
        cursor.execute("SELECT current_setting('hnsw.iterative_scan', true)")
        return cursor.fetchone()[0] == "strict_order"

    @staticmethod
    def _allowed_share(
        cursor,
        collection: Collection,
        filters: Filters,
        conditions: list[str],
        params: list,
        exact_scan_limit: int,
        ef_search: int,
        top_k: int,
        within: str | None = None,
    ) -> float | None:
        """Return the share of the collection's vectors (``within`` a scope index's scope:
        of the scope's) a filter allows, or ``None`` when an
        exact scan of those ranks them: it allows at most ``exact_scan_limit``, or no more
        than a walk would visit to keep ``walk_ef_search`` of them (about that many divided
        by the share: a 1% scope of 1M chunks, 10,000 vectors, against 40,000).

        PostgreSQL's estimate decides, except between half the limit and the limit, where
        the chunks are counted (up to the limit): an exact scan must not meet many more
        rows than the limit. Counting costs as many rows as the filter allows (a bitmap
        of them all: 16 ms for a 10% scope of 100k chunks, whose walk took 1.8), so a
        scope estimated above the limit is walked without. Estimated
        without the space condition, whose ``vector_dims`` the planner cannot estimate
        (it holds for all but a re-embedding's leftovers), counted with it.
        """
        estimate, total = estimated_rows_each(
            cursor,
            [
                filters.estimate_query(collection.pk),
                allowed_chunks(collection.pk, [within] if within else [], []),
            ],
        )
        if exact_scan_limit / 2 <= estimate <= exact_scan_limit:
            allowed_sql, allowed_params = allowed_chunks(
                collection.pk, [space_condition(collection, "c"), *conditions], params
            )
            cursor.execute(
                f"SELECT count(*) FROM ({allowed_sql} LIMIT %s) AS matching",
                [*allowed_params, int(exact_scan_limit) + 1],
            )
            counted = cursor.fetchone()[0]  # at most the limit + 1: the estimate stands
            if counted <= exact_scan_limit:
                return None
            estimate = max(estimate, counted)
        if estimate <= exact_scan_limit:
            return None
        share = min(1.0, estimate / max(total, estimate))
        if estimate <= walk_ef_search(ef_search, share, top_k) / share:
            return None
        return share


def walk_ef_search(ef_search: int, share: float, top_k: int) -> int:
    """Return the candidate list of a walk that keeps about ``share`` of what it visits:
    ``ef_search / √share``, at most four times ``ef_search``, at least ``top_k``, never past
    :data:`MAX_EF_SEARCH`; a wider list holds recall as the scope narrows (README: scoped
    searches)."""
    widened = max(min(4 * ef_search, math.ceil(ef_search / math.sqrt(share))), top_k)
    return min(widened, MAX_EF_SEARCH)


@dataclass(frozen=True)
class PlannedPart:
    """One part of a search, planned: ``SELECT c.id, <body> ORDER BY distance LIMIT
    top_k`` (``body`` and ``params``), and the planner settings it needs."""

    body: str
    params: list
    top_k: int
    settings: dict[str, str]

    @property
    def exact(self) -> bool:
        return self.settings.get("enable_indexscan") == "off"

    @property
    def walked(self) -> bool | None:
        """Whether it walks the index iteratively (``None``: as the session says)."""
        iterative = self.settings.get("hnsw.iterative_scan")
        return None if iterative is None else iterative == "strict_order"

    def query(self, number: int = 0, *, fenced: bool = False) -> tuple[str, list]:
        """Its SQL and parameters, rows tagged ``number``. ``fenced``: ordered outside a
        subquery, so that no index orders it (an exact part beside walks)."""
        if fenced:
            sql = (
                f"SELECT {number} AS part, id, distance FROM (SELECT c.id, {self.body} "
                "OFFSET 0) AS allowed ORDER BY distance LIMIT %s"
            )
        else:
            # Ordered by the output column: the index still orders the scan, and the
            # vector's literal is sent and parsed once less.
            sql = f"SELECT {number} AS part, c.id, {self.body} ORDER BY distance LIMIT %s"
        return sql, [*self.params, self.top_k]


#: The planner settings a search in several parts starts from (a fresh session's).
PLANNER_SETTINGS = {
    "enable_indexscan": "on",
    "enable_sort": "on",
    "hnsw.iterative_scan": "off",
}


def _set_and_compose(cursor, parts: Sequence[PlannedPart]) -> tuple[str, list]:
    """Set the transaction's planner settings for ``parts``; return one statement ranking
    them all (``part, id, distance`` rows).

    One part sets only what it needs. Several are one ``UNION ALL``, planned under one set
    of settings: the walks' (the widest list and scan limit; no sort where one walks a
    scope's graph), with index scans on, and each exact part ordered outside a subquery,
    where no index can order it.
    """
    if len(parts) == 1:
        settings = parts[0].settings
        sql, params = parts[0].query()
    else:
        settings = dict(PLANNER_SETTINGS)
        walks = [part for part in parts if not part.exact]
        settings["hnsw.ef_search"] = str(
            max(int(part.settings["hnsw.ef_search"]) for part in walks or parts)
        )
        for part in walks:
            for name in ("hnsw.iterative_scan", "enable_sort"):
                if name in part.settings:
                    settings[name] = part.settings[name]
        limits = [int(part.settings["hnsw.max_scan_tuples"]) for part in walks if part.walked]
        if limits:
            settings["hnsw.max_scan_tuples"] = str(max(limits))
        branches = [part.query(i, fenced=part.exact) for i, part in enumerate(parts)]
        sql = " UNION ALL ".join(f"({branch})" for branch, _ in branches)
        params = [value for _, branch_params in branches for value in branch_params]
    calls = ", ".join("set_config(%s, %s, true)" for _ in settings)
    cursor.execute(f"SELECT {calls}", [x for item in settings.items() for x in item])
    return sql, params


def vector_literal(vector: Sequence[float]) -> str:
    """Return pgvector's text form of ``vector`` (float32, as stored).

    Nine significant digits, the fewest that give every float32 back exactly: a third
    shorter than Python's float repr, and quicker to build and to parse.
    """
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ("%.9g," * len(values) % tuple(values))[:-1] + "]"


def check_search_options(ef_search: int, exact_scan_limit: int) -> None:
    """Refuse search hints that make no sense (the index's, and the dense retriever's,
    which passes them on to whichever index ranks)."""
    if not 1 <= ef_search <= MAX_EF_SEARCH:
        raise ValueError(
            f"ef_search must be between 1 and {MAX_EF_SEARCH} (pgvector's range), "
            f"not {ef_search!r}."
        )
    if exact_scan_limit < 0:
        raise ValueError(f"exact_scan_limit must be >= 0, not {exact_scan_limit!r}.")


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


def _create_indexes(
    collection: Collection, names: Sequence[str], graph_options: str, *, concurrently: bool
) -> None:
    """Create the collection's indexes named ``names`` (``_missing_indexes``): its HNSW
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
    how = _concurrently(concurrently)
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
                f"WHERE lexemes @@ {_sql_literal(cursor.fetchone()[0])}::tsquery"
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


def _concurrently(concurrently: bool) -> str:
    return "CONCURRENTLY " if concurrently else ""


def _build_under_way(cursor, name: str) -> bool:
    """Whether a session is building index ``name`` (invalid until it is done)."""
    cursor.execute(
        "SELECT EXISTS (SELECT FROM pg_stat_progress_create_index "
        "WHERE index_relid = to_regclass(%s) AND pid <> pg_backend_pid())",
        [name],
    )
    return cursor.fetchone()[0]


def declared_marks(declared: Mapping[str, Any]) -> tuple[list[str] | None, str | None]:
    """Return a declared scope's access tokens and metadata (JSON), as the BM25 index's
    scope marks take them (``retrieval_bm25_scope_query``)."""
    if "access" in declared:
        return [declared["access"]], None
    return None, json.dumps(declared["metadata"])


def _missing_indexes(collection: Collection) -> list[str]:
    """Return the names of the collection's indexes not built yet (``_create_indexes``),
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


def _existing_indexes(cursor, collection_id: int, *, leftovers: bool = False) -> list[str]:
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


def _existing_graphs(cursor, collection_id: int) -> list[str]:
    """Return the names of a collection's HNSW indexes: its own and its scopes'."""
    graphs = vector_index_name(collection_id)
    return [name for name in _existing_indexes(cursor, collection_id) if name.startswith(graphs)]


def _lock_declarations(collection: Collection) -> None:
    """Lock the collection's row and read its declared scopes afresh."""
    Collection.objects.select_for_update().filter(pk=collection.pk).exists()
    collection.refresh_from_db(fields=["scope_indexes"])


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


def scope_condition(declared: Mapping[str, Any], alias: str = "") -> str:
    """Return a declared scope's SQL condition, its value written out (as the space's), for
    a statement executed with parameters (``%`` doubled)."""
    column = f"{alias}." if alias else ""
    if "access" in declared:
        return f"{column}access ? {_sql_literal(declared['access'])}"
    return f"{column}metadata @> {_sql_literal(json.dumps(declared['metadata']))}::jsonb"


def _sql_literal(value: str) -> str:
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


def space_condition(collection: Collection, alias: str = "") -> str:
    """Return the SQL condition of the collection's HNSW index: its rows, in its space.

    Written out, not bound, so that the planner can match it to the index's predicate.
    """
    column = f"{alias}." if alias else ""
    return (
        f"{column}collection_id = {int(collection.pk)} "
        f"AND vector_dims({column}embedding) = {int(collection.dimensions)}"
    )
