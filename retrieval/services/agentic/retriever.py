"""Agentic retrieval as a retriever: rounds of rewrite → retrieve → judge, bounded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from django.core import checks

from retrieval.models import Collection
from retrieval.services.agentic.pipeline import (
    SUFFICIENCY_THRESHOLD,
    AgenticRetrievalPipeline,
    OnInsufficient,
    build,
    validate_limits,
)
from retrieval.services.core.filters import Filters
from retrieval.services.registry import retrievers, rewriters
from retrieval.services.retrievers.base import BaseRetriever, check_top_k
from retrieval.services.types import RetrievalResult, ScoredChunk


class AgenticRetriever(BaseRetriever):
    """Search ``retriever`` in rounds until a judge finds the chunks sufficient.

    Round 1 searches the query as asked; each later round searches a refinement of it
    (from what the rounds learned, never a query already searched) with a larger
    ``top_k`` (see :class:`AgenticRetrievalPipeline`). A judge scores each round's
    selected chunks in [0, 1]; the rounds stop at ``sufficiency_threshold`` or
    ``max_rounds``. Returns the deduplicated chunks of all rounds, best score first;
    the rounds are in the query's trace.

    The stages use the LLM ``llm`` when ``RETRIEVAL["LLMS"]`` configures it, and
    otherwise run offline: pseudo-relevance feedback from the selected chunks
    (``rewriter``, default ``"prf"``) and a query-term coverage judge. ``rewriter``
    names a configured rewriter to use in either case. With ``on_insufficient``
    ``"empty"``, a search no round was judged sufficient for returns nothing.
    """

    def __init__(
        self,
        *,
        retriever: str = "hybrid",
        llm: str = "default",
        rewriter: str | None = None,
        max_rounds: int = 3,
        sufficiency_threshold: float = SUFFICIENCY_THRESHOLD,
        max_top_k: int | None = 100,
        selected_chunk_limit: int = 5,
        on_insufficient: OnInsufficient | str = OnInsufficient.BEST_EFFORT,
    ) -> None:
        validate_limits(
            max_rounds=max_rounds,
            max_top_k=max_top_k,
            selected_chunk_limit=selected_chunk_limit,
            sufficiency_threshold=sufficiency_threshold,
        )
        self.retriever = retriever
        self.llm = llm
        self.rewriter = rewriter
        self.max_rounds = max_rounds
        self.sufficiency_threshold = sufficiency_threshold
        self.max_top_k = max_top_k
        self.selected_chunk_limit = selected_chunk_limit
        self.on_insufficient = OnInsufficient.parse(on_insufficient)

    def check(self) -> list:
        errors = []
        if self.retriever == self.alias or self.retriever not in retrievers:
            errors.append(
                checks.Error(
                    f"Agentic retriever {self.alias!r} searches {self.retriever!r}, which is "
                    + ("itself." if self.retriever == self.alias else "not in RETRIEVERS."),
                    id="retrieval.E006",
                )
            )
        if self.rewriter is not None and self.rewriter not in rewriters:
            errors.append(
                checks.Error(
                    f"Agentic retriever {self.alias!r} uses rewriter {self.rewriter!r}, "
                    "which is not in REWRITERS.",
                    id="retrieval.E006",
                )
            )
        return errors

    def pipeline(self, top_k: int) -> AgenticRetrievalPipeline:
        """Return the rounds' pipeline, with LLM stages if the LLM is configured."""
        return build(
            retriever=self.retriever,
            llm=self.llm,
            rewriter=self.rewriter,
            max_rounds=self.max_rounds,
            top_k=top_k,
            max_top_k=None if self.max_top_k is None else max(top_k, self.max_top_k),
            selected_chunk_limit=self.selected_chunk_limit,
            sufficiency_threshold=self.sufficiency_threshold,
            on_insufficient=self.on_insufficient,
        )

    def retrieve(
        self,
        query: str,
        *,
        collection: Collection,
        top_k: int = 10,
        filters: Filters | Mapping[str, Any] | None = None,
    ) -> list[RetrievalResult]:
        """Return the rounds' results as they were loaded (no second load of the chunks)."""
        check_top_k(top_k)
        return [
            replace(result, rank=rank)
            for rank, result in enumerate(self._rounds(query, collection, top_k, filters))
        ]

    def _rank(
        self, query: str, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        return [
            ScoredChunk(r.chunk_id, r.score, r.metadata)
            for r in self._rounds(query, collection, top_k, filters)
        ]

    def _rounds(
        self,
        query: str,
        collection: Collection,
        top_k: int,
        filters: Filters | Mapping[str, Any] | None,
    ) -> list[RetrievalResult]:
        """Run the rounds; return the best ``top_k`` of all, marked if they were selected."""
        outcome = self.pipeline(top_k).run(
            query, collection=collection, filters=Filters.parse(filters)
        )
        if not outcome.sufficient and self.on_insufficient is OnInsufficient.EMPTY:
            return []
        selected = {r.chunk_id for r in outcome.results}
        return [
            replace(r, metadata={**r.metadata, "agentic_selected": r.chunk_id in selected})
            for r in outcome.retrieved[:top_k]
        ]
