"""Running several retrievers ("legs") for one search, concurrently where it pays.

:func:`run_legs` runs the legs of a
:class:`~retrieval.services.retrievers.hybrid.HybridRetriever` and of a
:class:`~retrieval.services.query.pipelines.Pipeline` alike. Legs are ranked on the caller's
connection (so they see the caller's uncommitted writes), while the legs'
database-free preparations (query analysis, embedding) overlap with the database's
work: a quick leg's query (BM25) is sent at once in pipeline mode and ranked by the
database while the caller embeds the dense leg's query; further costly preparations
run on worker threads. With Django's connection pool, outside transactions, the dense
leg is then ranked on a second pooled connection while the database may still be
ranking BM25 on the first. A leg that fails is logged, recorded in the
trace and returned as failed while the others answer; only if every leg fails does the
search raise. A bad filter is the request's fault, not the leg's: it is raised at once.
:meth:`LegResults.fuse` then merges the lists with one of
:data:`~retrieval.services.core.fusion.FUSION_METHODS`, having first, for the methods in
:data:`~retrieval.services.core.fusion.SCORES_EVERY_CANDIDATE`, asked each leg for its scores
of the other legs' candidates (one statement per leg).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from django.db import connections

from retrieval.exceptions import InvalidFilterError, RetrievalError
from retrieval.querysets import chunk_documents
from retrieval.services.core.databases import search_database
from retrieval.services.core.fusion import (
    FUSION_METHODS,
    SCORED_FOR_FUSION,
    SCORES_EVERY_CANDIDATE,
)
from retrieval.services.core.tracing import current_trace, run_in_context
from retrieval.services.types import ScoredChunk

if TYPE_CHECKING:
    from retrieval.models import Collection
    from retrieval.services.core.filters import Filters

logger = logging.getLogger(__name__)


class Ranker(Protocol):
    """What the runner needs of a leg's retriever (every
    :class:`~retrieval.services.retrievers.base.BaseRetriever` is one)."""

    costly_prepare: bool

    def prepare(self, query: str, *, collection: Collection) -> Any: ...

    def rank_prepared(
        self, prepared: Any, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]: ...

    def send_rank(
        self, prepared: Any, *, collection: Collection, top_k: int, filters: Filters
    ) -> Callable[[], list[ScoredChunk]] | None: ...

    def score_chunks(
        self, prepared: Any, chunk_ids: Sequence[int], *, collection: Collection
    ) -> dict[int, float] | None: ...


@dataclass(frozen=True)
class Leg:
    """One ranked list to fetch: ``query`` ranked by ``retriever``, named ``name``.

    ``top_k``, if set, is how many this leg ranks, instead of the runner's: a fusing
    retriever's legs, run beside a pipeline's own, rank as many as that retriever asks.
    """

    name: str
    retriever: Ranker
    query: str
    weight: float = 1.0
    top_k: int | None = None


@dataclass
class LegResults:
    """What :func:`run_legs` returns: each answering leg's list, in leg order, and failures."""

    ranked: dict[str, list[ScoredChunk]]
    weights: dict[str, float]
    failed: dict[str, str]
    # Each answering leg's preparing plus ranking time; for a leg sent ahead, the time its
    # sending and reading took this thread (the database ranked it meanwhile).
    ms: dict[str, float]
    # What scoring other legs' candidates needs: each answering leg's leg and prepared query.
    legs: dict[str, Leg] = field(default_factory=dict)
    prepared: dict[str, Any] = field(default_factory=dict)
    collection: Collection | None = None

    def fuse(
        self, method: str, *, k: int = 60, top_k: int = 10, document_floor: float = 0.0
    ) -> list[ScoredChunk]:
        """Fuse the lists with ``method`` (and ``document_floor``, the chunks' documents
        looked up in one query); name failed legs in ``metadata["failed_legs"]``."""
        options: dict[str, Any] = {"k": k} if method == "rrf" else {}
        lists = self.scored_for_fusion() if method in SCORES_EVERY_CANDIDATE else self.ranked
        if document_floor:
            candidates = {s.chunk_id for results in lists.values() for s in results}
            documents = chunk_documents(sorted(candidates), using=search_database())
            options |= {"document_floor": document_floor, "documents": documents}
        fused = FUSION_METHODS[method](
            list(lists.values()),
            [self.weights[name] for name in self.ranked],
            top_k=top_k,
            names=list(self.ranked),
            **options,
        )
        return self.mark(fused)

    def scored_for_fusion(self) -> dict[str, list[ScoredChunk]]:
        """Each leg's list, then its scores of the other legs' candidates it can score.

        The candidates came from legs that applied the search's scope and filters, and
        each leg scores them within the collection only. A leg that cannot score given
        chunks (``score_chunks`` returns ``None``), or fails to, leaves them out: 0 there.
        """
        candidates = {s.chunk_id for results in self.ranked.values() for s in results}
        lists = {}
        for name, results in self.ranked.items():
            missing = sorted(candidates - {s.chunk_id for s in results})
            scores: dict[int, float] | None = None
            if missing and name in self.prepared and self.collection is not None:
                try:
                    scores = self.legs[name].retriever.score_chunks(
                        self.prepared[name], missing, collection=self.collection
                    )
                except Exception as e:
                    message = "Leg %r could not score the other legs' candidates: %s"
                    logger.warning(message, name, e, exc_info=True)
            lists[name] = [
                *results,
                *(
                    ScoredChunk(chunk_id, score, {SCORED_FOR_FUSION: True})
                    for chunk_id, score in sorted((scores or {}).items(), key=lambda x: -x[1])
                ),
            ]
        return lists

    def subset(self, names: Sequence[str]) -> LegResults:
        """These results for the legs ``names`` only (those that answered or failed)."""
        kept = [name for name in self.ranked if name in names]
        return LegResults(
            {name: self.ranked[name] for name in kept},
            {name: self.weights[name] for name in kept},
            {name: reason for name, reason in self.failed.items() if name in names},
            {name: self.ms[name] for name in kept},
            {name: self.legs[name] for name in kept if name in self.legs},
            {name: self.prepared[name] for name in kept if name in self.prepared},
            self.collection,
        )

    def mark(self, ranking: list[ScoredChunk]) -> list[ScoredChunk]:
        """Name the failed legs in each result's ``metadata["failed_legs"]``."""
        if self.failed:
            for scored in ranking:
                scored.metadata["failed_legs"] = dict(self.failed)
        return ranking


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_on_worker = threading.local()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="retrieval-leg")
        return _pool


def _prepare(leg: Leg, collection: Collection) -> tuple[Any, float]:
    """Return the leg's prepared query and the seconds preparing it took."""
    _on_worker.active = True
    started = time.perf_counter()
    try:
        return leg.retriever.prepare(
            leg.query, collection=collection
        ), time.perf_counter() - started
    finally:
        _on_worker.active = False


def run_legs(
    legs: Sequence[Leg],
    *,
    collection: Collection,
    top_k: int,
    filters: Filters,
    label: str = "search",
) -> LegResults:
    """Rank every leg (``top_k`` each), tolerating failing legs unless all fail.

    Quick legs (BM25) are prepared on this thread and their queries sent at once, in
    pipeline mode; while the database ranks them, this thread prepares one leg whose
    preparation is costly (embeds its query) and worker threads prepare the others.
    Every ranking runs on this thread's connection, but for that one leg, which is
    ranked on a second connection if :func:`_spare_connection` lends one.
    """
    if not legs:
        raise ValueError("There is no retriever (leg) to run.")
    if len({leg.name for leg in legs}) != len(legs):
        raise ValueError(f"Legs need distinct names, got {[leg.name for leg in legs]!r}.")
    outcome = _Outcome(label, tolerant=len(legs) > 1)
    if len(legs) == 1 or getattr(_on_worker, "active", False):
        # Nothing to overlap (or already on a worker: never wait on the pool from inside it).
        for leg in legs:
            with outcome.leg(leg.name):
                prepared = outcome.prepared[leg.name] = leg.retriever.prepare(
                    leg.query, collection=collection
                )
                outcome.ranked[leg.name] = leg.retriever.rank_prepared(
                    prepared, collection=collection, top_k=leg.top_k or top_k, filters=filters
                )
    else:
        _rank_overlapped(legs, collection, top_k, filters, outcome)
    if not outcome.ranked:
        raise RetrievalError(
            f"Every retriever of the {label} failed: "
            + "; ".join(f"{leg.name}: {outcome.failed[leg.name]}" for leg in legs)
        ) from outcome.errors[0]
    if outcome.failed:
        trace = current_trace()
        if trace is not None:
            trace.record("failed_legs", of=label, failed=dict(outcome.failed))
    order = [leg.name for leg in legs if leg.name in outcome.ranked]  # configuration order
    by_name = {leg.name: leg for leg in legs}
    return LegResults(
        {name: outcome.ranked[name] for name in order},
        {name: by_name[name].weight for name in order},
        outcome.failed,
        {name: round(outcome.seconds[name] * 1000, 2) for name in order},
        {name: by_name[name] for name in order},
        {name: outcome.prepared[name] for name in order if name in outcome.prepared},
        collection,
    )


def _rank_overlapped(
    legs: Sequence[Leg], collection: Collection, top_k: int, filters: Filters, outcome: _Outcome
) -> None:
    """Rank several legs, the database working while queries are prepared (see run_legs).

    This thread prepares a costly leg itself only when it has no ranking of its own to
    do meanwhile: then no worker has to hand that leg back to it.
    """
    quick = [leg for leg in legs if not leg.retriever.costly_prepare]
    costly = [leg for leg in legs if leg.retriever.costly_prepare]

    def options(leg: Leg) -> dict[str, Any]:
        return {"collection": collection, "top_k": leg.top_k or top_k, "filters": filters}

    sent: dict[str, Callable[[], list[ScoredChunk]]] = {}
    later: dict[str, Any] = {}  # quick legs that cannot be sent ahead: ranked afterwards
    own: Leg | None = None
    with _pipeline(search_database()):
        for leg in quick:
            with outcome.leg(leg.name):
                prepared = outcome.prepared[leg.name] = leg.retriever.prepare(
                    leg.query, collection=collection
                )
                fetch = leg.retriever.send_rank(prepared, **options(leg))
                if fetch is None:
                    later[leg.name] = prepared
                else:
                    sent[leg.name] = fetch
        own = costly[0] if costly and not later else None
        futures = {
            _executor().submit(run_in_context(_prepare), leg, collection): leg
            for leg in costly
            if leg is not own
        }
        if own is not None:
            with outcome.leg(own.name):
                later[own.name] = outcome.prepared[own.name] = own.retriever.prepare(
                    own.query, collection=collection
                )
            if sent and own.name in later:
                # The database may still be ranking the sent legs: rank this one beside
                # them, on a second connection, if the pool has one to spare.
                with _spare_connection(search_database()) as spare:
                    if spare:
                        with outcome.leg(own.name):
                            outcome.ranked[own.name] = own.retriever.rank_prepared(
                                later.pop(own.name), **options(own)
                            )
        for name, fetch in sent.items():
            with outcome.leg(name):
                outcome.ranked[name] = fetch()
    for leg in legs:
        if leg.name in later:
            with outcome.leg(leg.name):
                outcome.ranked[leg.name] = leg.retriever.rank_prepared(
                    later[leg.name], **options(leg)
                )
    for future in as_completed(futures):
        leg = futures[future]
        with outcome.leg(leg.name):
            prepared, preparing = future.result()
            outcome.prepared[leg.name] = prepared
            outcome.seconds[leg.name] = preparing
            outcome.ranked[leg.name] = leg.retriever.rank_prepared(prepared, **options(leg))


@contextmanager
def _pipeline(alias: str) -> Iterator[None]:
    """Put the connection in psycopg's pipeline mode: queries are sent without waiting.

    Results are still read in order; a driver without pipelines (psycopg2) runs as usual.
    """
    connection = connections[alias]
    connection.ensure_connection()
    pipeline = getattr(connection.connection, "pipeline", None)
    if pipeline is None or not _pipeline_supported():
        yield
        return
    # Leaving the pipeline reads its last results: an error there (the server gone) is
    # psycopg's own, wrapped as Django wraps every query's, so callers and the connection's
    # end-of-request check see a database error.
    with connection.wrap_database_errors, pipeline():
        yield


@contextmanager
def _spare_connection(alias: str) -> Iterator[bool]:
    """Swap a second connection from ``alias``'s pool in for this thread; yield whether one is.

    Only with Django's connection pool (psycopg 3, ``OPTIONS["pool"]``) and one idle in
    it, never waiting for one, and only in autocommit outside any transaction: what the
    caller wrote is then committed, so the second connection sees it too.
    """
    connection = connections[alias]
    pool = getattr(connection, "pool", None)
    if (
        pool is None
        or connection.in_atomic_block
        or not connection.get_autocommit()
        or not pool.get_stats().get("pool_available")
    ):
        yield False
        return
    spare = connection.copy()
    connections[alias] = spare
    try:
        yield True
    finally:
        connections[alias] = connection
        spare.close()  # back to the pool


def _pipeline_supported() -> bool:
    """Whether psycopg and its libpq support pipeline mode (libpq 14 or later)."""
    try:
        from psycopg import Pipeline
    except ImportError:
        return False
    return Pipeline.is_supported()


class _Outcome:
    """What :func:`run_legs` gathers: rankings, failures and each leg's seconds."""

    def __init__(self, label: str, *, tolerant: bool) -> None:
        self.label, self.tolerant = label, tolerant
        self.ranked: dict[str, list[ScoredChunk]] = {}
        self.failed: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        self.prepared: dict[str, Any] = {}
        self.errors: list[Exception] = []

    @contextmanager
    def leg(self, name: str) -> Iterator[None]:
        """Time a step of leg ``name``; record its failure (a bad filter is raised)."""
        started = time.perf_counter()
        try:
            yield
        except InvalidFilterError:
            raise
        except Exception as e:
            if not self.tolerant:
                raise
            logger.warning("Leg %r of the %s failed: %s", name, self.label, e, exc_info=True)
            self.failed[name] = f"{e.__class__.__name__}: {e}"
            self.errors.append(e)
        else:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
