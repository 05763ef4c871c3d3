"""Listwise reranking by a language model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval.exceptions import LLMError
from retrieval.services.llms.answers import valid_indices
from retrieval.services.llms.base import Message, check_llm_alias
from retrieval.services.llms.fitting import fit_passages, numbered
from retrieval.services.registry import llms
from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult

TEMPLATE = (
    "Rank the passages below by how well they answer the question, most useful first. "
    "Use the passage ids shown in brackets; leave out passages that do not help.\n\n"
    "Question: {query}\n\n{passages}"
)
#: Ids above this are refused by the schema (any id past the passages shown is ignored).
MAX_ID = 999


def ranking_schema(passages: int) -> dict[str, Any]:
    """Return the answer's schema: at most ``passages`` ids, so its length is bounded."""
    ids = {"type": "integer", "minimum": 0, "maximum": MAX_ID}
    return {
        "type": "object",
        "properties": {"ranking": {"type": "array", "items": ids, "maxItems": passages}},
        "required": ["ranking"],
    }


class LLMReranker(BaseReranker):
    """Ask the model to order the passages; scores go from 1.0 (first) down linearly.

    Passages the model leaves out keep their previous order after the ranked ones; ids
    it invents or repeats are ignored. Only the first ``max_passages`` are shown (each
    cut to ``passage_chars``); the rest follow in their previous order. If the call
    fails, the previous order is kept and the error is in the trace. ``llm`` names an
    alias of ``LLMS``; ``template`` is the prompt, with ``{query}`` and ``{passages}``.
    """

    def __init__(
        self,
        *,
        llm: str = "default",
        max_passages: int = 20,
        passage_chars: int = 800,
        template: str = TEMPLATE,
    ) -> None:
        if not 1 <= max_passages <= MAX_ID + 1 or passage_chars < 1:
            raise ValueError(
                f"max_passages must be from 1 to {MAX_ID + 1} and passage_chars at least 1, "
                f"not {max_passages!r} and {passage_chars!r}."
            )
        if "{query}" not in template or "{passages}" not in template:
            raise ValueError("template must contain {query} and {passages}.")
        self.llm = llm
        self.max_passages = max_passages
        self.passage_chars = passage_chars
        self.template = template

    def check(self) -> list:
        return check_llm_alias(f"Reranker {self.alias!r}", self.llm)

    def _scores(
        self, query: str, results: list[RetrievalResult]
    ) -> tuple[list[float], dict[str, object]]:
        texts = [
            " ".join(r.chunk.content.split())[: self.passage_chars]
            for r in results[: self.max_passages]
        ]

        def build(passages: Sequence[str]) -> tuple[list[Message], dict[str, Any]]:
            prompt = self.template.format(query=query, passages=numbered(passages))
            return [{"role": "user", "content": prompt}], ranking_schema(len(passages))

        llm, shown = llms[self.llm], 0
        try:
            # Passages past what the model's context holds follow in their previous order.
            fitted = fit_passages(llm, texts, build, purpose="rerank")
            shown = fitted.shown
            data = llm.complete_json(fitted.messages, schema=fitted.schema, purpose="rerank")
            ranking, error = data["ranking"], ""
        except LLMError as e:
            ranking, error = [], str(e)
        # 1.0 is a schema-valid integer; invented, repeated and out-of-range ids are ignored
        valid, ignored = valid_indices(ranking, shown)
        order = valid + [i for i in range(len(results)) if i not in valid]
        scores = [0.0] * len(results)
        for position, i in enumerate(order):
            scores[i] = 1.0 - position / len(results)
        details: dict[str, object] = {"ranked_by_model": len(valid)}
        if ignored:
            details["ignored_ids"] = ignored
        if error:
            details["error"] = error
        return scores, details
