"""The default index: vectors ranked inside PostgreSQL by pgvector.

Vectors live in ``retrieval_chunk.embedding``, written with the chunks (so
:meth:`PgvectorIndex.write` has nothing to do); each collection has a partial
HNSW index over ``embedding::vector(n)`` (the table holds several dimensions),
of the rows whose vectors have ``n`` dimensions: a build never casts a vector of
another space, such as the row versions a re-embedding replaced, which a
transaction begun before it may still see. Queries repeat both conditions, so
the planner can use the index (and an index built before the second condition
existed as well). The indexes' definitions are in ``ddl.py``, the queries that
rank in ``planner.py``.
"""

from __future__ import annotations

import logging
import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import DatabaseError, OperationalError, connection, connections, transaction

from retrieval.models import Chunk, Collection
from retrieval.services.core.databases import search_database
from retrieval.services.core.filters import Filters
from retrieval.services.indexes.base import (
    BaseIndex,
    IndexFeatures,
    VectorRow,
    check_search_options,
)
from retrieval.services.indexes.pgvector.ddl import (
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    PENDING_TRIGGER_EVENTS,
    REINDEX_LEFTOVER,
    check_graph_options,
    concurrently_keyword,
    create_indexes,
    existing_graphs,
    existing_indexes,
    lexeme_index_name,
    lock_declarations,
    missing_indexes,
    scope_index_name,
)
from retrieval.services.indexes.pgvector.planner import SearchOptions, planned_query, walked
from retrieval.services.indexes.scopes import checked_scope
from retrieval.services.types import ScoredChunk

logger = logging.getLogger(__name__)


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
        missing = missing_indexes(collection)
        if not missing:
            return
        if connection.get_autocommit():
            create_indexes(collection, missing, self.graph_options, concurrently=True)
            return
        try:
            with transaction.atomic():
                create_indexes(collection, missing, self.graph_options, concurrently=False)
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
        how = concurrently_keyword(connection.get_autocommit())
        with connection.cursor() as cursor:
            for name in existing_indexes(cursor, collection_id, leftovers=True):
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
        how = concurrently_keyword(connection.get_autocommit())
        built = self.built_graph_options(collection)
        with connection.cursor() as cursor:
            for name in existing_indexes(cursor, collection.pk, leftovers=True):
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
            names = existing_graphs(cursor, collection.pk)
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
            lock_declarations(collection)
            if declared not in collection.scope_indexes:
                collection.scope_indexes = [*collection.scope_indexes, declared]
                collection.save(update_fields=["scope_indexes"])
        self.ensure_space(collection)
        return scope_index_name(collection.pk, declared)

    def remove_scope_index(self, collection: Collection, declared: Mapping[str, Any]) -> bool:
        """Drop a declared scope's indexes; return whether it was declared."""
        declared = checked_scope(declared)
        with transaction.atomic():
            lock_declarations(collection)
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
            parts, sql, params = planned_query(
                cursor, vector, collection, filters, top_k, score_threshold, self._options(hints)
            )
            cursor.execute(sql, params)
            found: dict[int, list] = {i: [] for i in range(len(parts))}
            for part, chunk_id, distance in cursor.fetchall():
                found[part].append((chunk_id, distance))
            for i, part in enumerate(parts):
                if len(found[i]) >= top_k or part.exact:
                    continue
                if part.walked if part.walked is not None else walked(cursor):
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
            _, sql, params = planned_query(
                cursor, vector, collection, filters, top_k, score_threshold, self._options(hints)
            )
            cursor.execute("EXPLAIN " + sql, params)
            return "\n".join(row[0] for row in cursor.fetchall())

    def _options(self, hints: Mapping[str, Any]) -> SearchOptions:
        return SearchOptions(self.ef_search, self.exact_scan_limit, self.max_scan_tuples).hinted(
            hints
        )
