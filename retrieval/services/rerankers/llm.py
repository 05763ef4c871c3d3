"""Listwise reranking by a language model."""

from __future__ import annotations

from retrieval.exceptions import LLMError
from retrieval.services.llms.base import check_llm_alias
from retrieval.services.registry import llms
from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult

TEMPLATE = (
    "Rank the passages below by how well they answer the question, most useful first. "
    "Use the passage ids shown in brackets; leave out passages that do not help.\n\n"
    "Question: {query}\n\n{passages}"
)
SCHEMA = {
    "type": "object",
    "properties": {"ranking": {"type": "array", "items": {"type": "integer"}}},
    "required": ["ranking"],
}


class LLMReranker(BaseReranker):
    """Ask the model to order the passages; scores go from 1.0 (first) down linearly.

    Passages the model leaves out keep their previous order after the ranked ones; ids
    it invents or repeats are ignored. Only the first ``max_passages`` are shown (each
    cut to ``passage_chars``); the rest follow in their previous order. If the call
    fails, the previous order is kept and the error is in the trace.
    """

    def __init__(
        self,
        *,
        llm: str = "default",
        max_passages: int = 20,
        passage_chars: int = 800,
        template: str = TEMPLATE,
    ) -> None:
        if max_passages < 1 or passage_chars < 1:
            raise ValueError("max_passages and passage_chars must be at least 1.")
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
        shown = results[: self.max_passages]
        passages = "\n\n".join(
            f"[{i}] {' '.join(r.chunk.content.split())[: self.passage_chars]}"
            for i, r in enumerate(shown)
        )
        prompt = self.template.format(query=query, passages=passages)
        try:
            data = llms[self.llm].complete_json(
                [{"role": "user", "content": prompt}], schema=SCHEMA, purpose="rerank"
            )
            ranking, error = data["ranking"], ""
        except LLMError as e:
            ranking, error = [], str(e)
        valid: list[int] = []
        for i in ranking:
            if 0 <= i < len(shown) and i not in valid:  # invented and repeated ids are ignored
                valid.append(i)
        order = valid + [i for i in range(len(results)) if i not in valid]
        scores = [0.0] * len(results)
        for position, i in enumerate(order):
            scores[i] = 1.0 - position / len(results)
        details: dict[str, object] = {"ranked_by_model": len(valid)}
        ignored = [i for i in ranking if not 0 <= i < len(shown)]
        if ignored:
            details["ignored_ids"] = ignored
        if error:
            details["error"] = error
        return scores, details
