"""Hybrid retrieval: run several retrievers concurrently and fuse their rankings."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core import checks
from django.db import close_old_connections, connections

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.fusion import FUSION_METHODS
from retrieval.services.registry import retrievers as retriever_registry
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.types import ScoredChunk

logger = logging.getLogger(__name__)

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="retrieval-leg")
        return _pool


class HybridRetriever(BaseRetriever):
    """Fuse the rankings of named retrievers ("legs"), each with a weight.

    ``retrievers`` maps alias to weight (or lists aliases, all weighted 1).
    ``method`` is ``"rrf"`` (weighted reciprocal-rank fusion with constant ``k``),
    ``"relative_score"`` (min-max normalised weighted sum) or ``"dbsf"``
    (distribution-based score fusion). Each leg returns ``candidates`` results
    (at least ``top_k``); only the fused top ``top_k`` chunks are loaded. Legs run
    concurrently (the last in the caller's thread, the others on their own database
    connections), except inside a transaction, where they all run in the caller's
    thread so that they see its uncommitted writes. A leg that fails is logged and
    named in each result's ``metadata["failed_legs"]``; only if all fail does the
    search raise.
    """

    def __init__(
        self,
        *,
        retrievers: Mapping[str, float] | Sequence[str] = ("bm25", "dense"),
        method: str = "rrf",
        k: int = 60,
        candidates: int = 100,
    ) -> None:
        legs = (
            dict(retrievers) if isinstance(retrievers, Mapping) else dict.fromkeys(retrievers, 1.0)
        )
        if not legs:
            raise ValueError("retrievers must name at least one retriever.")
        if any(not isinstance(w, int | float) or w < 0 for w in legs.values()):
            raise ValueError(f"retriever weights must be non-negative numbers, not {legs!r}.")
        if method not in FUSION_METHODS:
            raise ValueError(
                f"Unknown fusion method {method!r}; choose one of {', '.join(FUSION_METHODS)}."
            )
        if candidates < 1:
            raise ValueError(f"candidates must be positive, not {candidates!r}.")
        self.legs = {alias: float(weight) for alias, weight in legs.items()}
        self.method = method
        self.k = k
        self.candidates = candidates

    def check(self) -> list:
        errors = []
        for alias in self.legs:
            if alias == self.alias or alias not in retriever_registry:
                errors.append(
                    checks.Error(
                        f"Hybrid retriever {self.alias!r} fuses {alias!r}, which is "
                        + ("itself." if alias == self.alias else "not in RETRIEVERS."),
                        id="retrieval.E006",
                    )
                )
        return errors

    def _rank(
        self, query: str, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        depth = max(self.candidates, top_k)
        aliases = list(self.legs)
        if connections["default"].in_atomic_block:
            outcomes = [
                _run_leg(a, query, collection, depth, filters, thread=False) for a in aliases
            ]
        else:
            # The last leg runs here, on this thread's connection; the others alongside.
            futures = [
                _executor().submit(_run_leg, alias, query, collection, depth, filters, thread=True)
                for alias in aliases[:-1]
            ]
            last = _run_leg(aliases[-1], query, collection, depth, filters, thread=False)
            outcomes = [future.result() for future in futures] + [last]
        answered = {
            a: out
            for a, out in zip(aliases, outcomes, strict=True)
            if not isinstance(out, Exception)
        }
        failed = {
            a: f"{out.__class__.__name__}: {out}"
            for a, out in zip(aliases, outcomes, strict=True)
            if isinstance(out, Exception)
        }
        if not answered:
            raise RetrievalError(
                "Every retriever of the hybrid failed: "
                + "; ".join(f"{alias}: {error}" for alias, error in failed.items())
            )
        options: dict[str, Any] = {"k": self.k} if self.method == "rrf" else {}
        fused = FUSION_METHODS[self.method](
            list(answered.values()),
            [self.legs[alias] for alias in answered],
            top_k=top_k,
            names=list(answered),
            **options,
        )
        if failed:
            for scored in fused:
                scored.metadata["failed_legs"] = failed
        return fused


def _run_leg(
    alias: str, query: str, collection: Collection, top_k: int, filters: Filters, *, thread: bool
) -> list[ScoredChunk] | Exception:
    """Rank with one leg; return its exception instead of raising so the others still count."""
    if thread:
        close_old_connections()  # honour CONN_MAX_AGE, like a request would
    try:
        return retriever_registry[alias].rank(
            query, collection=collection, top_k=top_k, filters=filters
        )
    except Exception as e:
        logger.warning("Hybrid leg %r failed for %r: %s", alias, query, e, exc_info=True)
        return e
    finally:
        if thread:
            close_old_connections()
