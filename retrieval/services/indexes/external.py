"""What external engines share: named spaces, the outbox, and results re-checked in PostgreSQL.

Each collection's vectors live in one engine collection (a "space") named
``{prefix}_c{collection id}_g{generation}``; ``Collection.index_space`` names the
active one. A rebuild fills the next generation from PostgreSQL's vectors, switches
the name in one UPDATE and drops the old space: searches see one or the other.

Ranking translates what the engine can express of a narrow scope's :class:`Filters`,
over-fetches, and keeps only ids that PostgreSQL confirms under the full ``Filters.sql``
(so the access scope's document restriction, conditions the engine knows nothing of,
and deletes it has not applied yet, still hold), widening the fetch until ``top_k``
survive or the engine has no more. A wide scope is searched unfiltered, with a fetch
sized by its share, and confirmed the same way. A scope so narrow that even the
engine's widest answer (``max_fetch``) would leave fewer than ``top_k`` is ranked in
PostgreSQL instead, so a narrow scope is never answered short.
"""

from __future__ import annotations

import math
import re
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from retrieval.exceptions import DimensionMismatchError, IndexUnavailableError
from retrieval.models import Chunk, Collection, IndexOperation
from retrieval.services.core.filters import (
    Filters,
    allowed_chunks,
    estimated_rows,
    estimated_rows_each,
    queryset_sql,
)
from retrieval.services.core.tracing import current_deadline, deadline, remote_timeout
from retrieval.services.indexes.base import (
    BaseIndex,
    VectorRow,
    check_query_dimensions,
    vector_literal,
)
from retrieval.services.indexes.pgvector import PgvectorIndex
from retrieval.services.types import ScoredChunk

#: Vectors read from PostgreSQL and written to the engine at once during a rebuild.
REBUILD_BATCH = 1000


class ExternalIndex(BaseIndex):
    """An engine outside PostgreSQL, kept in step through the outbox."""

    #: The most hits one engine query may return.
    max_fetch = 16384

    def __init__(
        self,
        *,
        prefix: str = "retrieval",
        overfetch: int = 3,
        timeout: float = 10.0,
        prefilter_share: float = 0.05,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,40}", prefix):
            raise ValueError(f"prefix must be letters, digits and _, a letter first: {prefix!r}.")
        if overfetch < 1:
            raise ValueError(f"overfetch must be >= 1, not {overfetch!r}.")
        if not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}.")
        if isinstance(prefilter_share, bool) or not (
            isinstance(prefilter_share, int | float) and 0 <= prefilter_share <= 1
        ):
            raise ValueError(
                f"prefilter_share must be a number in [0, 1], not {prefilter_share!r}."
            )
        self.prefix = prefix
        self.overfetch = overfetch
        #: The widest share of the collection's chunks (PostgreSQL's estimate) a scope may
        #: allow and still be sent to the engine as its filter; a wider one is searched
        #: unfiltered and confirmed in PostgreSQL. An engine's filtered HNSW walk is at
        #: its weakest at middling shares (Milvus 2.3: recall@10 0.74 at 10%, README),
        #: where over-fetching by the share keeps the open search's recall; below a few
        #: percent the engines scan the allowed vectors exactly. 1: always the filter.
        self.prefilter_share = float(prefilter_share)
        #: Seconds a search may wait for the engine, connecting, loading and every request
        #: included (and within the search's SEARCH_DEADLINE): a search of an engine that
        #: stopped answering (frozen, or cut off by the network) fails instead of hanging.
        self.timeout = float(timeout)

    # Engine primitives ------------------------------------------------------

    @abstractmethod
    def _create(self, name: str, dimensions: int) -> None:
        """Create an empty cosine space ``name`` if missing."""

    @abstractmethod
    def _drop(self, name: str) -> None:
        """Drop space ``name`` if it exists."""

    @abstractmethod
    def _names(self) -> list[str]:
        """Return the names of every space in the engine."""

    @abstractmethod
    def _upsert(self, name: str, collection_id: int, rows: Sequence[VectorRow]) -> None:
        """Insert or replace vectors."""

    @abstractmethod
    def _delete(self, name: str, collection_id: int, chunk_ids: Sequence[int]) -> None:
        """Delete ids (absent ones are ignored)."""

    def _search(
        self, name: str, collection_id: int, vector: Sequence[float], limit: int, filters: Any
    ) -> list[tuple[int, float]]:
        """Return up to ``limit`` (chunk id, cosine similarity), best first.

        An engine implements this or :meth:`_search_many` (one request for many vectors):
        here, one vector is a batch of one.
        """
        if type(self)._search_many is ExternalIndex._search_many:
            raise NotImplementedError(
                f"{type(self).__name__} implements neither _search nor _search_many."
            )
        return self._search_many(name, collection_id, [vector], limit, filters, {})[0]

    @abstractmethod
    def _all_ids(self, name: str, collection_id: int) -> set[int]:
        """Return every chunk id in space ``name``."""

    def _filled(self, name: str) -> None:  # noqa: B027 (optional hook)
        """Called when a rebuild has written every vector of space ``name`` (e.g. to flush)."""

    def _count(self, name: str, collection_id: int) -> int:
        """Return how many vectors space ``name`` holds, counting every write acknowledged."""
        return len(self._all_ids(name, collection_id))

    @abstractmethod
    def translate(self, filters: Filters, collection: Collection) -> Any:
        """Return the engine's form of ``filters`` (None: no condition), which
        :meth:`check_filters` found the engine can express (its ``features``)."""

    # Spaces -----------------------------------------------------------------

    def space_name(self, collection_id: int, generation: int) -> str:
        return f"{self.prefix}_c{int(collection_id)}_g{int(generation)}"

    def _space(self, collection: Collection) -> str:
        if not collection.index_space:
            collection.refresh_from_db(fields=["index_space"])
        return collection.index_space

    def ensure_space(self, collection: Collection) -> None:
        name = self._space(collection) or self.space_name(collection.pk, 1)
        self._create(name, int(collection.dimensions))
        if collection.index_space != name:
            Collection.objects.filter(pk=collection.pk).update(index_space=name)
            collection.index_space = name

    def drop_space(self, collection_id: int) -> None:
        own = f"{self.prefix}_c{int(collection_id)}_g"
        for name in self._names():
            if name.startswith(own) and name[len(own) :].isdigit():
                self._drop(name)

    def swap_space(self, collection: Collection) -> None:
        """Record a rebuild: once the swap commits, the outbox fills a space of the new vectors."""
        from retrieval.services.indexes import outbox

        outbox.record_rebuild(collection)

    def rebuild(self, collection: Collection) -> None:
        """Fill the next generation from PostgreSQL, switch to it, drop the old one."""
        old = self._space(collection)
        generation = int(old.rsplit("_g", 1)[1]) + 1 if old else 1
        name = self.space_name(collection.pk, generation)
        self._drop(name)  # a rebuild interrupted earlier
        self._create(name, int(collection.dimensions))
        chunks = Chunk.objects.filter(collection=collection, embedding__isnull=False).order_by("pk")
        last = written = 0
        while batch := list(
            chunks.filter(pk__gt=last).values_list("pk", "document_id", "metadata", "embedding")[
                :REBUILD_BATCH
            ]
        ):
            self._upsert(name, collection.pk, batch)
            last, written = batch[-1][0], written + len(batch)
        self._filled(name)
        held = self._count(name, collection.pk)
        if held != written:  # searches must not switch to a space missing vectors
            raise RuntimeError(
                f"The rebuilt space {name!r} holds {held} vectors of the {written} written; "
                "the old space stays in use."
            )
        Collection.objects.filter(pk=collection.pk).update(index_space=name)
        collection.index_space = name
        if old and old != name:
            self._drop(old)

    # Vectors ----------------------------------------------------------------

    def write(self, collection: Collection, rows: Iterable[VectorRow]) -> None:
        rows = list(rows)
        for row in rows:
            if len(row[3]) != collection.dimensions:
                raise DimensionMismatchError(
                    f"Chunk {row[0]} has {len(row[3])} dimensions; collection "
                    f"{collection.name!r} holds {collection.dimensions} (rebuild its index)."
                )
        if rows:
            self._upsert(self._space(collection), collection.pk, rows)

    def delete(self, collection: Collection, chunk_ids: Sequence[int]) -> None:
        name = self._space(collection)
        if name and chunk_ids:
            self._delete(name, collection.pk, list(chunk_ids))

    def ids(self, collection: Collection) -> set[int]:
        name = self._space(collection)
        if not name or name not in self._names():
            return set()
        return self._all_ids(name, collection.pk)

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
        return self.rank_many(
            [vector],
            collection=collection,
            top_k=top_k,
            filters=filters,
            score_threshold=score_threshold,
            **hints,
        )[0]

    def rank_many(
        self,
        vectors: Sequence[Sequence[float]],
        *,
        collection: Collection,
        top_k: int,
        filters: Filters | None = None,
        score_threshold: float | None = None,
        **hints: Any,
    ) -> list[list[ScoredChunk]]:
        """Rank each vector: the engine's answer (one request for all, where it batches),
        confirmed in PostgreSQL and merged with the chunks the engine has not caught up on.

        Chunks whose outbox operations are still pending are ranked exactly in
        PostgreSQL, which holds every committed vector, and take their place in the
        engine's ranking; deleted ones drop out in the confirmation. While a rebuild is
        pending (a re-embedding moved the vectors to a new space, or the collection moved
        here from another index) the engine's space is stale or missing, and PostgreSQL
        ranks the whole collection, as the pgvector index does.
        """
        vectors = list(vectors)
        for vector in vectors:
            check_query_dimensions(vector, collection)
        filters = Filters.parse(filters)
        self.check_filters(filters)  # refuses what the engine cannot express
        if not vectors:
            return []
        # External ids looked up once, not in each estimate, confirmation and ranking.
        filters = filters.resolved(collection.pk)
        waiting = pending_kinds(collection)
        rebuilding = IndexOperation.Kind.REBUILD in waiting
        sent, fetch = (None, 0) if rebuilding else self._engine_request(filters, collection, top_k)
        if sent is None:
            # pgvector's ranking of PostgreSQL's vectors, which hold every committed chunk:
            # through its HNSW index while a collection moves here from pgvector, an exact
            # scan after a re-embedding, its planner's choice for a scope too narrow for
            # the engine's widest answer.
            return [
                rank_in_postgres(vector, collection, top_k, filters, score_threshold, hints)
                for vector in vectors
            ]
        engine_filters = self.translate(sent, collection)
        if engine_filters is EMPTY:
            return [[] for _ in vectors]
        name = self._space(collection)
        # Connecting, loading the space and every widening request share one timeout.
        with deadline(self.timeout, f"the timeout of index {self.alias!r} ({self.timeout:g} s)"):
            ranked = (
                self._rank_in_engine(
                    name, vectors, collection, fetch, top_k, filters, engine_filters,
                    score_threshold, hints,
                )
                if name
                else [[] for _ in vectors]
            )  # fmt: skip
        if IndexOperation.Kind.WRITE not in waiting:
            return ranked
        merged = []
        for vector, engine in zip(vectors, ranked, strict=True):
            fresh = rank_pending(vector, collection, top_k, filters, score_threshold)
            exact = {s.chunk_id for s in fresh}
            combined = [s for s in engine if s.chunk_id not in exact] + fresh
            merged.append(sorted(combined, key=by_score)[:top_k])
        return merged

    def _engine_request(
        self, filters: Filters, collection: Collection, top_k: int
    ) -> tuple[Filters | None, int]:
        """Return the filters the engine applies and how many hits it is first asked for;
        ``None`` when even its widest answer would hold fewer than ``top_k`` of the scope.

        A scope wider than ``prefilter_share`` is not sent: the fetch grows by what the
        confirmation will drop (a 10% scope: ten times). A narrower one is, with the
        access scope as its documents when it has at most ``SCOPE_PREFILTER_LIMIT`` (a
        wider one grows the fetch by the share it keeps of the rest). The shares are
        PostgreSQL's estimates: planning only, no rows read.
        """
        fetch = max(top_k * self.overfetch, top_k + 10)
        if not filters:
            return filters, min(fetch, self.max_fetch)
        share = estimated_share(filters, collection)
        if share > self.prefilter_share:
            sent, kept = Filters(), share
        else:
            ids = resolved_document_ids(filters, collection)
            sent = replace(
                filters,
                document_ids=None if ids is None else tuple(ids),
                documents=None,
                documents_within=None,
                reader=None,
            )
            unsent = filters.documents_within is not None and sent.document_ids is None
            kept = share / max(estimated_share(sent, collection), share) if unsent else 1.0
        fetch = math.ceil(fetch / max(kept, 1e-9))
        if fetch > self.max_fetch:
            return None, self.max_fetch
        return sent, fetch

    def _rank_in_engine(
        self,
        name: str,
        vectors: list[Sequence[float]],
        collection: Collection,
        fetch: int,
        top_k: int,
        filters: Filters,
        engine_filters: Any,
        score_threshold: float | None,
        hints: dict[str, Any],
    ) -> list[list[ScoredChunk]]:
        """Ask the engine for ``fetch`` hits, keep what PostgreSQL confirms, widen a query
        short of ``top_k``."""
        answers = self._engine(
            collection,
            lambda: self._search_many(name, collection.pk, vectors, fetch, engine_filters, hints),
        )
        confirmed = confirm(collection, [i for hits in answers for i, _ in hits], filters)
        ranked = []
        for vector, hits in zip(vectors, answers, strict=True):
            limit = fetch
            while True:
                if score_threshold is not None:
                    hits = [(i, s) for i, s in hits if s >= score_threshold]
                kept = [ScoredChunk(i, float(s)) for i, s in hits if i in confirmed]
                if len(kept) >= top_k or len(hits) < limit:
                    break
                if limit >= self.max_fetch:
                    # A scope too narrow for the engine's widest answer to hold top_k of
                    # it (and too wide to send as a condition): PostgreSQL ranks it.
                    kept = rank_in_postgres(
                        vector, collection, top_k, filters, score_threshold, hints
                    )
                    break
                limit = min(limit * 4, self.max_fetch)
                hits = self._engine(
                    collection,
                    lambda limit=limit, vector=vector: self._search_many(
                        name, collection.pk, [vector], limit, engine_filters, hints
                    )[0],
                )
                confirmed |= confirm(collection, [i for i, _ in hits], filters)
            ranked.append(sorted(kept, key=by_score)[:top_k])
        return ranked

    def _engine(self, collection: Collection, call: Any) -> Any:
        """Run an engine request of a search; its failure is ``IndexUnavailableError``."""
        try:
            return call()
        except Exception as e:  # the engine's own errors, whatever its client raises
            self.reset()
            limit = current_deadline()
            passed = ""
            if limit is not None and limit.left() <= 0:  # the deadline cut the request short
                passed = f" (no time left: {limit.what} has passed)"
            raise IndexUnavailableError(
                f"Index {self.alias!r} ({type(self).__name__}) did not answer the search "
                f"of collection {collection.name!r}: {e.__class__.__name__}: {e}{passed}"
            ) from e

    def _seconds(self) -> float:
        """Return the seconds the next engine request may take: ``timeout``, cut to what
        the search's deadline (and this engine's share of it) leaves."""
        return remote_timeout(self.timeout)

    def _search_many(
        self,
        name: str,
        collection_id: int,
        vectors: Sequence[Sequence[float]],
        limit: int,
        filters: Any,
        hints: dict[str, Any],
    ) -> list[list[tuple[int, float]]]:
        """Return each vector's hits: one :meth:`_search` per vector, unless the engine
        batches them (then it implements this instead)."""
        return [self._search(name, collection_id, vector, limit, filters) for vector in vectors]


def by_score(scored: ScoredChunk) -> tuple[float, int]:
    """Best first; equal scores by chunk id, so that an engine's ties come out the same way
    every time (an HNSW search returns them in no particular order)."""
    return -scored.score, scored.chunk_id


#: What ``translate`` returns for filters no chunk can match (e.g. an empty id list).
EMPTY = object()


def confirm(collection: Collection, chunk_ids: Sequence[int], filters: Filters) -> set[int]:
    """Return the ids among ``chunk_ids`` that exist in ``collection`` with a vector and match."""
    if not chunk_ids:
        return set()
    conditions, params = filters.sql("c", collection_id=collection.pk)
    where = " AND ".join(
        ["c.collection_id = %s", "c.id = ANY(%s)", "c.embedding IS NOT NULL", *conditions]
    )
    with connections[Chunk.objects.db].cursor() as cursor:
        cursor.execute(
            f"SELECT c.id FROM retrieval_chunk c WHERE {where}",
            [collection.pk, list(set(chunk_ids)), *params],
        )
        return {row[0] for row in cursor.fetchall()}


def rank_in_postgres(
    vector: Sequence[float],
    collection: Collection,
    top_k: int,
    filters: Filters,
    score_threshold: float | None,
    hints: dict[str, Any],
) -> list[ScoredChunk]:
    """Rank with pgvector's planner over PostgreSQL's vectors, which hold every committed
    chunk: an exact scan of a small allowed set, the HNSW index where there is one."""
    return PgvectorIndex().rank(
        vector,
        collection=collection,
        top_k=top_k,
        filters=filters,
        score_threshold=score_threshold,
        **hints,
    )


def pending_kinds(collection: Collection) -> set[str]:
    """Return the kinds of the collection's outbox operations that change what a search
    must find ("write", "rebuild"): none, when the engine has caught up."""
    with connections[Chunk.objects.db].cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT kind FROM retrieval_indexoperation "
            "WHERE collection_id = %s AND kind IN ('write', 'rebuild')",
            [collection.pk],
        )
        return {row[0] for row in cursor.fetchall()}


def rank_pending(
    vector: Sequence[float],
    collection: Collection,
    top_k: int,
    filters: Filters,
    score_threshold: float | None,
) -> list[ScoredChunk]:
    """Rank, by exact cosine similarity in PostgreSQL, the chunks of the collection's
    pending "write" operations (few: what the engine has not caught up on)."""
    dimensions = int(collection.dimensions)
    similarity = f"1 - ((c.embedding::vector({dimensions})) <=> %s::vector)"
    conditions, params = filters.sql("c", collection_id=collection.pk)
    where = [
        "c.collection_id = %s",
        "c.embedding IS NOT NULL",
        f"vector_dims(c.embedding) = {dimensions}",
        *conditions,
        "c.id IN (SELECT (jsonb_array_elements_text(o.chunk_ids))::bigint "
        "FROM retrieval_indexoperation o WHERE o.collection_id = %s AND o.kind = 'write')",
    ]
    where_params: list[Any] = [collection.pk, *params, collection.pk]
    literal = vector_literal(vector)
    if score_threshold is not None:
        where.append(f"{similarity} >= %s")
        where_params += [literal, score_threshold]
    with connections[Chunk.objects.db].cursor() as cursor:
        cursor.execute(
            f"SELECT c.id, {similarity} AS score FROM retrieval_chunk c "
            f"WHERE {' AND '.join(where)} ORDER BY score DESC, c.id LIMIT %s",
            [literal, *where_params, top_k],
        )
        return [ScoredChunk(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]


#: Up to this many documents of the access scope are sent to the engine as a condition;
#: a wider scope is left to the confirmation in PostgreSQL (the widening fetches, then
#: PostgreSQL's own ranking).
SCOPE_PREFILTER_LIMIT = 1000


def estimated_share(filters: Filters, collection: Collection) -> float:
    """Return PostgreSQL's estimate of the share of the collection's chunks ``filters``
    allow (from the statistics of the chunks' metadata and access, no rows read)."""
    conditions, _ = filters.sql("c", collection_id=collection.pk)
    if not conditions:
        return 1.0
    with connections[Chunk.objects.db].cursor() as cursor:
        allowed, total = estimated_rows_each(
            cursor,
            [
                filters.estimate_query(collection.pk),
                allowed_chunks(collection.pk, [], []),
            ],
        )
    return min(1.0, allowed / max(total, allowed, 1.0))


def resolved_document_ids(filters: Filters, collection: Collection) -> list[int] | None:
    """Return the document ids ``filters`` allow (external ids resolved), or None for all.

    The access scope (``filters.documents_within``) narrows them when it leaves few
    enough documents in ``collection``; ``confirm`` enforces it in any case.
    """
    from retrieval.models import Document

    named = filters.resolved(collection.pk).document_ids
    ids = None if named is None else list(named)
    if filters.documents_within is not None:
        visible = Document.objects.filter(
            collection=collection, pk__in=filters.documents_within.order_by().values("pk")
        )
        if ids is not None:
            visible = visible.filter(pk__in=ids)
        # Unordered: the model's ordering would sort every visible document before the limit.
        visible = visible.order_by().values_list("pk", flat=True)
        if estimated_count(visible) <= 10 * SCOPE_PREFILTER_LIMIT:
            within = list(visible[: SCOPE_PREFILTER_LIMIT + 1])
            if len(within) <= SCOPE_PREFILTER_LIMIT:
                ids = within
    return ids


def estimated_count(queryset: QuerySet) -> float:
    """Return PostgreSQL's estimate of the rows ``queryset`` returns (planning only): a
    scope estimated at ten times the documents an engine is sent is not looked up (its
    first 1,001 documents cost 3-8 ms at 100k chunks); a rougher estimate (a hook's
    condition) only costs the look-up, or a wider fetch."""
    compiled = queryset_sql(queryset)
    if compiled is None:
        return 0.0
    with connections[queryset.db].cursor() as cursor:
        return estimated_rows(cursor, *compiled)
