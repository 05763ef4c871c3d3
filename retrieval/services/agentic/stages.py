"""The agentic loop's pluggable stages: selectors pick chunks, evaluators judge them.

Each has an LLM implementation and an offline one that needs no key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.exceptions import BudgetExceeded, LLMError
from retrieval.services.llms.answers import valid_indices
from retrieval.services.llms.base import Message
from retrieval.services.llms.fitting import fit_passages, numbered
from retrieval.services.registry import analyzers, llms
from retrieval.services.types import RetrievalResult


@dataclass(frozen=True)
class Selection:
    """The chunks a selector kept, and why."""

    results: tuple[RetrievalResult, ...]
    reason: str = ""


@dataclass(frozen=True)
class Verdict:
    """An evaluator's judgement: ``score`` in [0, 1] says how sufficient the chunks are."""

    score: float
    reason: str = ""


#: Ids above this are refused by the schema; any past the candidates is ignored.
MAX_ID = 999
#: The longest reason a selector or judge may give (it bounds the answer's tokens).
REASON_CHARS = 200


def _texts(results: Sequence[RetrievalResult], chars: int = 700) -> list[str]:
    return [" ".join(r.chunk.content.split())[:chars] for r in results]


class BaseSelector(ABC):
    """Pick at most ``limit`` of the candidates that help answer the query."""

    @abstractmethod
    def select(
        self, query: str, candidates: Sequence[RetrievalResult], *, limit: int
    ) -> Selection: ...


class BaseEvaluator(ABC):
    """Judge whether the selected chunks suffice to answer the query."""

    @abstractmethod
    def evaluate(self, query: str, selection: Sequence[RetrievalResult]) -> Verdict: ...


class CoverageSelector(BaseSelector):
    """Offline: take chunks by score, first those that cover query terms not yet covered."""

    def __init__(self, *, analyzer: str = "default") -> None:
        self.analyzer = analyzer

    def select(self, query: str, candidates: Sequence[RetrievalResult], *, limit: int) -> Selection:
        analyzer = analyzers[self.analyzer]
        wanted = set(analyzer.terms(query))
        covered: set[str] = set()
        chosen: list[RetrievalResult] = []
        for result in sorted(candidates, key=lambda r: -r.score):
            new = (wanted & set(analyzer.terms(result.chunk.content))) - covered
            if new and len(chosen) < limit:
                chosen.append(result)
                covered |= new
        for result in sorted(candidates, key=lambda r: -r.score):  # fill up by score
            if len(chosen) >= limit:
                break
            if result not in chosen:
                chosen.append(result)
        chosen.sort(key=lambda r: -r.score)
        return Selection(tuple(chosen), f"covers {len(covered)} of {len(wanted)} query terms")


class CoverageEvaluator(BaseEvaluator):
    """Offline: the share of the query's terms that the selected chunks contain."""

    def __init__(self, *, analyzer: str = "default") -> None:
        self.analyzer = analyzer

    def evaluate(self, query: str, selection: Sequence[RetrievalResult]) -> Verdict:
        analyzer = analyzers[self.analyzer]
        wanted = set(analyzer.terms(query))
        if not wanted:
            return Verdict(0.0, "the query has no searchable terms")
        found: set[str] = set()
        for result in selection:
            found |= wanted & set(analyzer.terms(result.chunk.content))
        missing = sorted(wanted - found)
        reason = f"covers {len(found)} of {len(wanted)} query terms" + (
            f"; missing: {', '.join(missing)}" if missing else ""
        )
        return Verdict(len(found) / len(wanted), reason)


class LLMSelector(BaseSelector):
    """Ask the model which passages help; falls back to :class:`CoverageSelector`.

    Ids are read as :func:`valid_indices` reads them: ``1.0`` is 1; ids out of range,
    repeated or past ``limit`` are ignored.
    """

    @staticmethod
    def schema(limit: int) -> dict[str, Any]:
        """Return the answer's schema: at most ``limit`` ids and a short reason."""
        ids = {"type": "integer", "minimum": 0, "maximum": MAX_ID}
        return {
            "type": "object",
            "properties": {
                "selected": {"type": "array", "items": ids, "maxItems": limit},
                "reason": {"type": "string", "maxLength": REASON_CHARS},
            },
            "required": ["selected"],
        }

    def __init__(self, *, llm: str = "default") -> None:
        self.llm = llm

    def select(self, query: str, candidates: Sequence[RetrievalResult], *, limit: int) -> Selection:
        def build(passages: Sequence[str]) -> tuple[list[Message], dict[str, Any]]:
            prompt = (
                f"Question: {query}\n\nPassages:\n{numbered(passages)}\n\n"
                f"Choose at most {limit} passages needed to answer the question, by id."
            )
            return [{"role": "user", "content": prompt}], self.schema(limit)

        llm = llms[self.llm]
        try:
            # Candidates come best first: those past what the model's context holds go.
            fitted = fit_passages(llm, _texts(candidates), build, purpose="select")
            data = llm.complete_json(fitted.messages, schema=fitted.schema, purpose="select")
        except BudgetExceeded:
            raise
        except LLMError as e:
            fallback = CoverageSelector().select(query, candidates, limit=limit)
            return Selection(fallback.results, f"model failed ({e}); {fallback.reason}")
        ids, _ = valid_indices(data["selected"], fitted.shown)
        return Selection(tuple(candidates[i] for i in ids[:limit]), data.get("reason", ""))


class LLMEvaluator(BaseEvaluator):
    """Ask the model for a sufficiency score in [0, 1] with a reason."""

    SCHEMA = {
        "type": "object",
        "properties": {
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "maxLength": REASON_CHARS},
        },
        "required": ["score"],
    }

    def __init__(self, *, llm: str = "default") -> None:
        self.llm = llm

    def evaluate(self, query: str, selection: Sequence[RetrievalResult]) -> Verdict:
        def build(passages: Sequence[str]) -> tuple[list[Message], dict[str, Any]]:
            prompt = (
                f"Question: {query}\n\nPassages:\n{numbered(passages)}\n\n"
                "How completely do these passages answer the question? Give a score from 0 "
                "(nothing relevant) to 1 (fully answered) and a one-sentence reason."
            )
            return [{"role": "user", "content": prompt}], self.SCHEMA

        llm = llms[self.llm]
        try:
            fitted = fit_passages(llm, _texts(selection), build, purpose="evaluate")
            data = llm.complete_json(fitted.messages, schema=self.SCHEMA, purpose="evaluate")
        except BudgetExceeded:
            raise
        except LLMError as e:
            return Verdict(0.0, f"the judge failed: {e}")
        return Verdict(float(data["score"]), data.get("reason", ""))
