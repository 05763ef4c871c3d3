"""Retrievers for tests that exercise failure handling of the components around them."""

from __future__ import annotations

from retrieval.exceptions import RetrievalError
from retrieval.services.retrievers.base import BaseRetriever


class BrokenRetriever(BaseRetriever):
    """Fail every search, as a leg whose backend is down would."""

    def _rank(self, query, *, collection, top_k, filters):
        raise RetrievalError("backend is down")


class RendezvousRetriever(BaseRetriever):
    """BM25 that records each search's thread and connection, and waits at a barrier.

    With ``parties`` searches meeting at the barrier, a batch that ran them one after
    another would break it (``BrokenBarrierError``) instead of passing. Each thread has an
    instance of its own (the registry's), so a test starts the barrier and the record
    with :meth:`meet`.
    """

    barrier = None
    seen: list = []
    costly_prepare = True  # so fusion prepares the legs on separate threads

    @classmethod
    def meet(cls, parties: int = 2) -> None:
        """Have the next ``parties`` searches meet at the barrier; forget those seen."""
        import threading

        cls.barrier = threading.Barrier(parties, timeout=10)
        cls.seen = []

    def prepare(self, query, *, collection):
        import threading

        from django.db import connections

        wrapper = connections["default"]  # this thread's own, unlike the `connection` proxy
        type(self).seen.append((query, threading.current_thread().name, wrapper))
        type(self).barrier.wait()
        return query

    def _rank(self, query, *, collection, top_k, filters):
        from retrieval.services.registry import retrievers

        return retrievers["bm25"].rank(query, collection=collection, top_k=top_k, filters=filters)


class UnfilterableRetriever(BaseRetriever):
    """Refuse every filter, as an engine that cannot express one does."""

    def _rank(self, query, *, collection, top_k, filters):
        from retrieval.exceptions import InvalidFilterError

        raise InvalidFilterError("this engine cannot filter on metadata.colour")


class RankOnlyRetriever(BaseRetriever):
    """BM25's ranking from a retriever that cannot score given chunks (the default)."""

    def _rank(self, query, *, collection, top_k, filters):
        from retrieval.services.registry import retrievers

        return retrievers["bm25"].rank(query, collection=collection, top_k=top_k, filters=filters)


class FailingScorerRetriever(RankOnlyRetriever):
    """BM25's ranking, but scoring given chunks fails."""

    def score_chunks(self, prepared, chunk_ids, *, collection):
        raise RetrievalError("scores are down")


class LastQueryRetriever(BaseRetriever):
    """BM25 that keeps the query it prepared on ``self`` and ranks the one it kept, as a
    component with per-call state does. Searches meet at ``barrier`` in between: two that
    shared one instance would both rank the query kept last."""

    barrier = None

    def prepare(self, query, *, collection):
        self.query = query
        type(self).barrier.wait()
        return query

    def _rank(self, prepared, *, collection, top_k, filters):
        from retrieval.services.registry import retrievers

        return retrievers["bm25"].rank(
            self.query, collection=collection, top_k=top_k, filters=filters
        )
