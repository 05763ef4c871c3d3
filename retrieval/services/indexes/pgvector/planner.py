"""How pgvector ranks a search: its parts, their queries and the planner settings.

A filter matching at most ``exact_scan_limit`` chunks is answered by an exact scan of
those chunks, a wider one by pgvector's iterative index scan in strict order, its
``ef_search`` widened as the filter narrows (:func:`walk_ef_search`). A declared scope's own
graph is walked with a list ``SCOPE_GRAPH_WIDENING`` times wider. A reader's scope with
declared tokens is ranked in parts (``scopes.scope_parts``), planned as one statement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.models import Collection
from retrieval.services.core.filters import Filters, allowed_chunks, estimated_rows_each
from retrieval.services.indexes.base import MAX_EF_SEARCH, check_query_dimensions, vector_literal
from retrieval.services.indexes.pgvector.ddl import space_condition
from retrieval.services.indexes.scopes import (
    indexed_scope,
    is_whole_scope,
    scope_condition,
    scope_parts,
    states_scope,
)

#: A declared scope's own graph is walked with this many times the ``ef_search`` of the
#: collection's: it holds a fraction of the collection's vectors, so a wider list costs
#: less than widening the open search would. At 1M chunks (10% scopes' graphs, 200 queries)
#: 150 instead of 100 took recall@10 from 0.941-0.958 to 0.970; 200 reached 0.982-0.983
#: but took 1.85-2.07x the open search in the latency bench (README: scoped searches).
SCOPE_GRAPH_WIDENING = 1.5


@dataclass(frozen=True)
class SearchOptions:
    """How widely a search walks: the index's OPTIONS, or a search's hints in their stead."""

    ef_search: int
    exact_scan_limit: int
    max_scan_tuples: int

    def hinted(self, hints: Mapping[str, Any]) -> SearchOptions:
        """Return these options with those a search's ``hints`` set instead."""
        exact_scan_limit = hints.get("exact_scan_limit")
        return SearchOptions(
            ef_search=int(hints.get("ef_search") or self.ef_search),
            exact_scan_limit=self.exact_scan_limit
            if exact_scan_limit is None
            else exact_scan_limit,
            max_scan_tuples=int(hints.get("max_scan_tuples") or self.max_scan_tuples),
        )


def planned_query(
    cursor,
    vector: Sequence[float],
    collection: Collection,
    filters: Filters | Mapping | None,
    top_k: int,
    score_threshold: float | None,
    options: SearchOptions,
) -> tuple[list[PlannedPart], str, list]:
    """Plan a search's parts, set the transaction's planner settings for them; return
    the parts and the one statement ranking them (``part, id, distance`` rows)."""
    check_query_dimensions(vector, collection)
    literal = vector_literal(vector)
    parts = [
        _planned_part(cursor, literal, collection, part, top_k, score_threshold, options)
        for part in scope_parts(collection, filters)
    ]
    return parts, *set_and_compose(cursor, parts)


def _planned_part(
    cursor,
    literal: str,
    collection: Collection,
    filters: Filters | None,
    top_k: int,
    score_threshold: float | None,
    options: SearchOptions,
) -> PlannedPart:
    """Plan one part of a search for the query vector ``literal`` (:func:`vector_literal`):
    its query, and the planner settings it needs.

    The cast matches the collection's partial HNSW index.
    """
    ef_search = options.ef_search
    exact_scan_limit, max_scan_tuples = options.exact_scan_limit, options.max_scan_tuples
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
            share = _allowed_share(
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


def walked(cursor) -> bool:
    """True if this transaction's query walked the index iteratively (a filtered one)."""
    cursor.execute("SELECT current_setting('hnsw.iterative_scan', true)")
    return cursor.fetchone()[0] == "strict_order"


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


def set_and_compose(cursor, parts: Sequence[PlannedPart]) -> tuple[str, list]:
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
