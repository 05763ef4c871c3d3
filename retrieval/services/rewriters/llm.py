"""Rewriters that ask a language model: a standalone query, paraphrases, or HyDE."""

from __future__ import annotations

from typing import Any

from retrieval.exceptions import LLMError
from retrieval.models import Collection
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.llms.base import check_llm_alias
from retrieval.services.registry import llms
from retrieval.services.rewriters.base import BaseQueryRewriter, Rewrite, Turn, format_history

STANDALONE_TEMPLATE = (
    "Rewrite the user's last question as one standalone search query for a document "
    "search engine: resolve pronouns and references from the conversation, keep names and "
    "numbers, add no facts. Answer with the query only.\n\n"
    "Conversation:\n{history}\n\nQuestion: {query}\n\nSearch query:"
)
PARAPHRASE_TEMPLATE = (
    "Write {n} different search queries that would find documents answering the question "
    "below, using other words (synonyms, more specific or more general terms).\n\n"
    "Question: {query}"
)
#: Completion tokens asked for a HyDE passage; one cut below half of this is a failure.
HYDE_TOKENS = 200
HYDE_TEMPLATE = (
    "Write a short passage (3 sentences) that could appear in a document answering the "
    "question below. Write it as a statement of fact, not as an answer to someone.\n\n"
    "Question: {query}\n\nPassage:"
)


class _LLMRewriter(BaseQueryRewriter):
    method = "llm"

    def __init__(self, *, llm: str = "default", template: str) -> None:
        if "{query}" not in template:
            raise ValueError("template must contain {query}.")
        self.llm = llm
        self.template = template

    def check(self) -> list:
        return check_llm_alias(f"Rewriter {self.alias!r}", self.llm)

    def _prompt(self, query: str, history: list[Turn], **extra: Any) -> list[dict[str, str]]:
        content = self.template.format(
            query=query, history=format_history(history) or "(none)", **extra
        )
        return [{"role": "user", "content": content}]

    def _fallback(self, query: str, reason: str) -> Rewrite:
        return Rewrite(query, (query,), self.method, fallback=True, reason=reason)


class LLMQueryRewriter(_LLMRewriter):
    """Fold the conversation into one standalone query (``{query}``, optional ``{history}``).

    The query is the answer's first line. Falls back to the original query on an empty or
    failed answer.
    """

    method = "standalone"

    def __init__(self, *, llm: str = "default", template: str = STANDALONE_TEMPLATE) -> None:
        super().__init__(llm=llm, template=template)

    def _rewrite(self, query: str, *, collection: Collection, history: list[Turn]) -> Rewrite:
        try:
            answer = llms[self.llm].complete(
                self._prompt(query, history), purpose="rewrite", max_tokens=96
            )
        except LLMError as e:
            return self._fallback(query, str(e))
        # The query is the first line: models often explain it after a line break, and a
        # small one may go on until max_tokens, which only matters if it cut that line.
        first, newline, _ = answer.text.strip().partition("\n")
        text = " ".join(first.split()).strip('"')
        if not text:
            return self._fallback(query, "the model answered nothing")
        if answer.truncated and not newline:
            return self._fallback(query, "the answer was cut at max_tokens")
        return Rewrite(query, (text,), self.method)


class MultiQueryRewriter(_LLMRewriter):
    """Ask for ``n`` paraphrases; the caller retrieves each and fuses the rankings."""

    method = "multi_query"

    def __init__(
        self,
        *,
        llm: str = "default",
        n: int = 3,
        include_original: bool = True,
        template: str = PARAPHRASE_TEMPLATE,
    ) -> None:
        if not isinstance(n, int) or not 1 <= n <= 10:
            raise ValueError(f"n must be an integer from 1 to 10, not {n!r}.")
        super().__init__(llm=llm, template=template)
        self.n = n
        self.include_original = include_original

    def _rewrite(self, query: str, *, collection: Collection, history: list[Turn]) -> Rewrite:
        schema = {
            "type": "object",
            "properties": {
                "queries": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                }
            },
            "required": ["queries"],
        }
        try:
            data = llms[self.llm].complete_json(
                self._prompt(query, history, n=self.n), schema=schema, purpose="multi_query"
            )
        except LLMError as e:
            return self._fallback(query, str(e))
        paraphrases = [" ".join(q.split()) for q in data["queries"] if q.strip()][: self.n]
        queries = [query] if self.include_original else []
        queries += [q for q in paraphrases if q.lower() not in {x.lower() for x in queries}]
        if not queries:
            return self._fallback(query, "the model gave no usable paraphrase")
        return Rewrite(query, tuple(queries), self.method)


class HyDEQueryRewriter(_LLMRewriter):
    """Hypothetical document embeddings: retrieve with a passage the model imagines."""

    method = "hyde"

    def __init__(
        self, *, llm: str = "default", include_original: bool = True, template: str = HYDE_TEMPLATE
    ) -> None:
        super().__init__(llm=llm, template=template)
        self.include_original = include_original

    def _rewrite(self, query: str, *, collection: Collection, history: list[Turn]) -> Rewrite:
        try:
            answer = llms[self.llm].complete(
                self._prompt(query, history), purpose="hyde", max_tokens=HYDE_TOKENS
            )
        except LLMError as e:
            return self._fallback(query, str(e))
        passage = answer.text.strip()
        if not passage:
            return self._fallback(query, "the model answered nothing")
        if answer.truncated and count_tokens(passage) < HYDE_TOKENS // 2:
            # cut short (by the budget, usually): a stub is no hypothetical answer
            return self._fallback(query, "the answer was cut at max_tokens")
        queries = (query, passage) if self.include_original else (passage,)
        return Rewrite(query, queries, self.method, details={"hypothetical": passage})
