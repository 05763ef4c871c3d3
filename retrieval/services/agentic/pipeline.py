"""The bounded agentic block: retrieve → select → evaluate → prepare_retry, a few rounds."""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval.exceptions import BudgetExceeded
from retrieval.models import Collection
from retrieval.services.agentic.stages import BaseEvaluator, BaseSelector, Selection, Verdict
from retrieval.services.query.filters import Filters
from retrieval.services.query.tracing import current_trace
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.rewriters.base import BaseQueryRewriter
from retrieval.services.types import RetrievalResult


class OnInsufficient(enum.Enum):
    """What to return when no round was judged sufficient."""

    BEST_EFFORT = "best_effort"  # the last round's selection
    EMPTY = "empty"  # nothing


@dataclass(frozen=True)
class AgenticResult:
    """The selected chunks, whether they were judged sufficient, and every round.

    ``retrieved`` is every round's candidates, deduplicated (best score kept), best first.
    """

    results: tuple[RetrievalResult, ...]
    sufficient: bool
    rounds: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    retrieved: tuple[RetrievalResult, ...] = ()


class AgenticRetrievalPipeline:
    """Retrieve, select, judge; retry with a rewritten query and a larger ``top_k``.

    Stops when a round's verdict reaches ``sufficiency_threshold``, after ``max_rounds``,
    or when the LLM budget runs out. ``top_k`` grows by ``growth`` each retry, never
    past ``max_top_k``; at most ``selected_chunk_limit`` chunks are selected a round.
    """

    def __init__(
        self,
        *,
        retriever: BaseRetriever,
        selector: BaseSelector,
        evaluator: BaseEvaluator,
        rewriter: BaseQueryRewriter | None = None,
        max_rounds: int = 3,
        top_k: int = 10,
        max_top_k: int = 50,
        growth: float = 2.0,
        selected_chunk_limit: int = 5,
        sufficiency_threshold: float = 0.7,
        on_insufficient: OnInsufficient | str = OnInsufficient.BEST_EFFORT,
    ) -> None:
        for name, stage, kind in (
            ("retriever", retriever, BaseRetriever),
            ("selector", selector, BaseSelector),
            ("evaluator", evaluator, BaseEvaluator),
        ):
            if not isinstance(stage, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, not {type(stage).__name__}.")
        if rewriter is not None and not isinstance(rewriter, BaseQueryRewriter):
            raise TypeError(f"rewriter must be a BaseQueryRewriter, not {type(rewriter).__name__}.")
        validate_limits(
            max_rounds=max_rounds,
            top_k=top_k,
            max_top_k=max_top_k,
            selected_chunk_limit=selected_chunk_limit,
            sufficiency_threshold=sufficiency_threshold,
        )
        if max_top_k < top_k:
            raise ValueError(f"max_top_k ({max_top_k}) must be at least top_k ({top_k}).")
        if not growth >= 1:
            raise ValueError(f"growth must be at least 1, not {growth!r}.")
        self.retriever = retriever
        self.selector = selector
        self.evaluator = evaluator
        self.rewriter = rewriter
        self.max_rounds = max_rounds
        self.top_k = top_k
        self.max_top_k = max_top_k
        self.growth = growth
        self.selected_chunk_limit = selected_chunk_limit
        self.sufficiency_threshold = sufficiency_threshold
        self.on_insufficient = OnInsufficient(on_insufficient)

    def run(
        self,
        query: str,
        *,
        collection: Collection,
        filters: Mapping[str, Any] | None = None,
    ) -> AgenticResult:
        """Run the rounds for ``query`` and return the final selection."""
        rounds: list[dict[str, Any]] = []
        search_query, top_k = query, self.top_k
        selection = Selection(())
        sufficient = False
        best: dict[int, RetrievalResult] = {}
        for number in range(1, self.max_rounds + 1):
            started = time.monotonic()
            calls_before = _llm_calls()
            record: dict[str, Any] = {"round": number, "query": search_query, "top_k": top_k}
            rounds.append(record)
            candidates: list[RetrievalResult] | None = None
            try:
                candidates = self.retriever.retrieve(
                    search_query, collection=collection, top_k=top_k, filters=filters
                )
                for result in candidates:  # kept before any LLM stage can exhaust the budget
                    if result.chunk_id not in best or result.score > best[result.chunk_id].score:
                        best[result.chunk_id] = result
                selection = self.selector.select(query, candidates, limit=self.selected_chunk_limit)
                verdict = self.evaluator.evaluate(query, selection.results)
            except BudgetExceeded as e:
                if candidates is not None:  # end with what this round has
                    record["candidates"] = [r.chunk_id for r in candidates]
                    if not selection.results:
                        reason = "the budget ran out: the retriever's top candidates"
                        selection = Selection(
                            tuple(candidates[: self.selected_chunk_limit]), reason
                        )
                    record["selected"] = [r.chunk_id for r in selection.results]
                record.update(stopped=str(e), ms=_ms(started), **_llm_usage(calls_before))
                break
            sufficient = verdict.score >= self.sufficiency_threshold
            record.update(
                candidates=[r.chunk_id for r in candidates],
                selected=[r.chunk_id for r in selection.results],
                selection_reason=selection.reason,
                verdict=round(verdict.score, 4),
                reason=verdict.reason,
                sufficient=sufficient,
            )
            stop = sufficient or number == self.max_rounds
            if not stop:  # the retry's rewrite belongs to this round's record
                try:
                    search_query, top_k = self.prepare_retry(
                        query, collection, verdict, top_k, filters=filters
                    )
                    record["next_query"] = search_query
                except BudgetExceeded as e:
                    record["stopped"] = str(e)
                    stop = True
            record.update(ms=_ms(started), **_llm_usage(calls_before))
            if stop:
                break
        _record_rounds(rounds)
        retrieved = tuple(sorted(best.values(), key=lambda r: (-r.score, r.chunk_id)))
        if not sufficient and self.on_insufficient is OnInsufficient.EMPTY:
            return AgenticResult((), False, tuple(rounds), retrieved)
        return AgenticResult(selection.results, sufficient, tuple(rounds), retrieved)

    def prepare_retry(
        self,
        query: str,
        collection: Collection,
        verdict: Verdict,
        top_k: int,
        *,
        filters: Mapping[str, Any] | Filters | None = None,
    ) -> tuple[str, int]:
        """Return the next round's query (rewritten, if a rewriter is set) and ``top_k``.

        The rewrite reads only what ``filters`` (the search's, with its scope) allow."""
        next_query = query
        if self.rewriter is not None:
            next_query = self.rewriter.rewrite(
                query, collection=collection, filters=Filters.parse(filters)
            ).queries[0]
        return next_query, min(self.max_top_k, max(top_k + 1, int(top_k * self.growth)))


def validate_limits(*, sufficiency_threshold: float, **counts: int) -> None:
    """Raise ``ValueError`` unless every count is a positive integer and the threshold
    is in [0, 1]."""
    for name, value in counts.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}.")
    if not 0 <= sufficiency_threshold <= 1:
        raise ValueError(f"sufficiency_threshold must be in [0, 1], not {sufficiency_threshold!r}.")


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 2)


def _llm_calls() -> int:
    trace = current_trace()
    return len(trace.llm_calls) if trace else 0


def _llm_usage(calls_before: int) -> dict[str, Any]:
    """Return the tokens and LLM milliseconds spent since ``calls_before`` calls."""
    trace = current_trace()
    calls = trace.llm_calls[calls_before:] if trace else []
    return {
        "llm_calls": len(calls),
        "tokens": sum(c.total_tokens for c in calls if not c.cached),
        "llm_ms": round(sum(c.ms for c in calls), 2),
    }


def _record_rounds(rounds: list[dict[str, Any]]) -> None:
    trace = current_trace()
    if trace is not None:
        for record in rounds:
            trace.record("agentic_round", **record)
