"""The retriever interface: a query -> ranked :class:`RetrievalResult` records."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retrieval.models import Collection
from retrieval.querysets import load_chunks
from retrieval.services.core.databases import search_database
from retrieval.services.core.filters import Filters
from retrieval.services.types import RetrievalResult, ScoredChunk

if TYPE_CHECKING:
    from retrieval.services.core.legs import Leg, LegResults


class BaseRetriever(ABC):
    """Rank a collection's chunks for a query.

    A search has two steps: :meth:`prepare` does the work that needs no database
    (analysing or embedding the query) and may run on any thread; ``_rank`` ranks
    chunk ids in the database. :meth:`retrieve` then loads the chunks of the final
    list in one query. Every retriever applies the collection scope and
    :class:`Filters` the same way; results are sorted by descending score with
    0-based ``rank``.
    """

    alias: str = ""
    #: :meth:`prepare` takes real time (it embeds the query): fusion prepares such a leg
    #: while the database ranks the others (:func:`retrieval.services.core.legs.run_legs`).
    costly_prepare: bool = False

    def retrieve(
        self,
        query: str,
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[RetrievalResult]:
        """Return at most ``top_k`` results for ``query`` in ``collection``, each ``score``
        in [0, 1] (:meth:`normalise`)."""
        ranking = self.rank(query, collection=collection, top_k=top_k, filters=filters)
        return load_results(self.normalise(ranking), filters=filters)

    def normalise(self, ranking: list[ScoredChunk]) -> list[ScoredChunk]:
        """Return ``ranking`` with its scores in [0, 1], the score it had kept as
        ``metadata["raw_score"]`` (unless it holds one already, as fused scores do).

        Scores of at most 1 stay as they are, negatives counting 0 (cosine similarities,
        fused scores); a ranking with a score above 1 is divided by its best. :meth:`rank`
        keeps the raw scores, which fusion combines.
        """
        if any(s.score > 1.0 for s in ranking):
            return scaled_by_best(ranking)
        return [_with_raw(s, max(0.0, s.score)) for s in ranking]

    def rank(
        self,
        query: str,
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[ScoredChunk]:
        """Return the ids and scores of the best ``top_k`` chunks, best first."""
        prepared = self.prepare(query, collection=collection)
        return self.rank_prepared(prepared, collection=collection, top_k=top_k, filters=filters)

    def prepare(self, query: str, *, collection: Collection) -> Any:
        """Return what ranking needs from ``query``, without touching the database."""
        return query

    def rank_prepared(
        self,
        prepared: Any,
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[ScoredChunk]:
        """Rank with the output of :meth:`prepare`."""
        check_top_k(top_k)
        return self._rank(
            prepared, collection=collection, top_k=top_k, filters=Filters.parse(filters)
        )

    def batches(self, collection: Collection) -> bool:
        """Whether :meth:`rank_many_prepared` ranks many queries in one request (no: one
        :meth:`rank_prepared` per query; the dense retriever on an index that batches)."""
        return False

    def prepare_many(self, queries: Sequence[str], *, collection: Collection) -> list[Any]:
        """Return :meth:`prepare`'s output for each query (one batch where it can)."""
        return [self.prepare(query, collection=collection) for query in queries]

    def rank_many_prepared(
        self,
        prepared: Sequence[Any],
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[list[ScoredChunk]]:
        """Return :meth:`rank_prepared`'s answer for each prepared query, in order."""
        return [
            self.rank_prepared(p, collection=collection, top_k=top_k, filters=filters)
            for p in prepared
        ]

    def send_rank(
        self, prepared: Any, *, collection: Collection, top_k: int, filters: Filters
    ) -> Callable[[], list[ScoredChunk]] | None:
        """Send the ranking query now; return a function that reads its result.

        Fusion calls this with the search connection in psycopg's pipeline mode, so
        the database ranks while the caller goes on (e.g. embeds another leg's
        query). ``None``, the default: the retriever cannot, and is ranked later by
        :meth:`rank_prepared`.
        """
        return None

    def score_chunks(
        self, prepared: Any, chunk_ids: Sequence[int], *, collection: Collection
    ) -> dict[int, float] | None:
        """Return this retriever's scores of the given chunks of ``collection``, or ``None``.

        Fusion that scores every candidate with every leg
        (:data:`~retrieval.services.core.fusion.SCORES_EVERY_CANDIDATE`) asks each leg for the
        other legs' candidates; a chunk left out of the answer scores 0 there. ``None``,
        the default: this retriever cannot score given chunks.
        """
        return None

    def fused_legs(self, query: str, *, top_k: int) -> list[Leg] | None:
        """Return the legs this retriever fuses to rank ``top_k`` for ``query``, or ``None``.

        A pipeline runs such legs beside its own, in its one leg runner, and gives their
        results to :meth:`fuse_legs`: a search runs the runner once, never nested. ``None``,
        the default: this retriever ranks by itself.
        """
        return None

    def fuse_legs(self, results: LegResults, *, top_k: int) -> list[ScoredChunk]:
        """Fuse the results of :meth:`fused_legs`' legs into this retriever's ranking."""
        raise NotImplementedError(f"{type(self).__name__} fuses no legs.")

    @abstractmethod
    def _rank(
        self, prepared: Any, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        """Rank chunk ids in the database; arguments are already validated."""

    def check(self) -> list:
        """Return Django check messages about this retriever's configuration."""
        return []


def check_top_k(top_k: object) -> None:
    """Refuse a ``top_k`` that is not a positive integer (``True`` included)."""
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
        raise ValueError(f"top_k must be a positive integer, not {top_k!r}.")


def load_results(
    scored: Sequence[ScoredChunk], *, filters: Filters | Mapping[str, Any] | None = None
) -> list[RetrievalResult]:
    """Load the chunks (with their documents) of a ranking in one query.

    A chunk outside the access scope carried by ``filters`` is never loaded.
    """
    db = search_database()
    # The scope's condition, as ranking applies it (chunks of any collection).
    conditions, params = Filters.parse(filters).using(db).scope_only().sql("c", collection_id=None)
    ids = [s.chunk_id for s in scored]
    chunks = load_chunks(ids, using=db, conditions=conditions, params=params)
    # Absent: deleted since it was ranked, or outside the scope.
    present = [s for s in scored if s.chunk_id in chunks]
    return [
        RetrievalResult(
            chunk=chunks[s.chunk_id], score=s.score, rank=rank, metadata=dict(s.metadata)
        )
        for rank, s in enumerate(present)
    ]


def scaled_by_best(ranking: list[ScoredChunk]) -> list[ScoredChunk]:
    """Each score divided by the ranking's best (negatives count 0), the raw one kept."""
    best = max((s.score for s in ranking), default=0.0)
    return [_with_raw(s, max(0.0, s.score / best) if best > 0 else 0.0) for s in ranking]


def _with_raw(scored: ScoredChunk, score: float) -> ScoredChunk:
    metadata = {"raw_score": scored.score, **scored.metadata}
    return ScoredChunk(scored.chunk_id, score, metadata)
