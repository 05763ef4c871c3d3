"""Rewriters that ask a language model: a standalone query, paraphrases, HyDE, sub-queries."""

from __future__ import annotations

from typing import Any

from retrieval.exceptions import BudgetExceeded, LLMError
from retrieval.models import Collection
from retrieval.services.clients.tokens import count_tokens
from retrieval.services.llms.answers import ANSWER_CHARS
from retrieval.services.llms.base import check_llm_alias
from retrieval.services.registry import llms
from retrieval.services.rewriters.base import BaseQueryRewriter, Rewrite, Turn, format_history

STANDALONE_TEMPLATE = (
    "Rewrite the user's last question as one standalone search query for a document "
    "search engine: resolve pronouns and references from the conversation, spell out "
    "abbreviations, make an ambiguous term precise (which product, which sense of the "
    "word), and add a synonym of a key term where documents may use another word. Keep "
    "names and numbers, add no facts. Answer with the query only, on one line.\n\n"
    "Conversation:\n{history}\n\nQuestion: {query}\n\nSearch query:"
)
PARAPHRASE_TEMPLATE = (
    "Write {n} different search queries that would find documents answering the question "
    "below, using other words (synonyms, more specific or more general terms).\n\n"
    "Question: {query}"
)
DECOMPOSE_TEMPLATE = (
    "Split the question below into the separate questions it asks, one per aspect, at "
    "most {n}. Each must make sense alone (repeat the subject instead of 'it'). A "
    "question that asks one thing stays one question.\n\nQuestion: {query}"
)
#: Completion tokens asked for a HyDE passage; one cut below half of this is a failure.
HYDE_TOKENS = 200
HYDE_TEMPLATE = (
    "Write a short passage (3 sentences) that could appear in a document answering the "
    "question below. Write it as a statement of fact, not as an answer to someone.\n\n"
    "Question: {query}\n\nPassage:"
)
#: Completion tokens asked for a standalone query.
QUERY_TOKENS = 96
#: The longest query a JSON answer may hold (it bounds the answer's tokens).
QUERY_CHARS = 120


def queries_schema(key: str, n: int) -> dict[str, Any]:
    """Return the schema of a JSON answer listing 1 to ``n`` queries under ``key``."""
    query = {"type": "string", "minLength": 1, "maxLength": QUERY_CHARS}
    return {
        "type": "object",
        "properties": {key: {"type": "array", "items": query, "minItems": 1, "maxItems": n}},
        "required": [key],
    }


class _LLMRewriter(BaseQueryRewriter):
    """Ask the chat model ``llm`` (an alias of ``LLMS``) with the prompt ``template``.

    ``template`` is formatted with ``{query}`` (required), ``{history}`` and ``{context}``.
    """

    method = "llm"
    supports_context = True

    def __init__(self, *, llm: str = "default", template: str) -> None:
        if "{query}" not in template:
            raise ValueError("template must contain {query}.")
        self.llm = llm
        self.template = template

    def check(self) -> list:
        return check_llm_alias(f"Rewriter {self.alias!r}", self.llm)

    def _prompt(
        self, query: str, history: list[Turn], context: str = "", **extra: Any
    ) -> list[dict[str, str]]:
        content = self.template.format(
            query=query,
            history=format_history(history) or "(none)",
            context=context or "(none)",
            **extra,
        )
        if context and "{context}" not in self.template:
            content = f"Context:\n{context}\n\n{content}"
        return [{"role": "user", "content": content}]

    def _fallback(self, query: str, error: Exception | str) -> Rewrite:
        stopped = str(error) if isinstance(error, BudgetExceeded) else ""
        return Rewrite(
            query, (query,), self.method, fallback=True, reason=str(error), stopped=stopped
        )

    def _ask(self, query: str, history: list[Turn], context: str, **options: Any) -> Any:
        """Return the model's answer (text, or JSON with ``schema``); raise ``LLMError``."""
        extra = options.pop("extra", {})
        messages = self._prompt(query, history, context, **extra)
        if "schema" in options:
            return llms[self.llm].complete_json(messages, **options)
        return llms[self.llm].complete(messages, **options)


class LLMQueryRewriter(_LLMRewriter):
    """Fold the conversation into one standalone query (``{query}``, optional ``{history}``
    and ``{context}``).

    The query is the answer's first line. Falls back to the original query on an empty or
    failed answer.
    """

    method = "standalone"

    def __init__(self, *, llm: str = "default", template: str = STANDALONE_TEMPLATE) -> None:
        super().__init__(llm=llm, template=template)

    def _rewrite(
        self, query: str, *, collection: Collection, history: list[Turn], context: str = ""
    ) -> Rewrite:
        try:
            answer = self._ask(query, history, context, purpose="rewrite", max_tokens=QUERY_TOKENS)
        except LLMError as e:
            return self._fallback(query, e)
        # The query is the first line: models often explain it after a line break, and a
        # small one may go on until max_tokens, which only matters if it cut that line.
        first, newline, _ = answer.text.strip().partition("\n")
        # A server that ignores max_tokens may answer a line of any length.
        text = " ".join(first.split()).strip('"')[:ANSWER_CHARS]
        if not text:
            return self._fallback(query, "the model answered nothing")
        if answer.truncated and not newline:
            return self._fallback(query, "the answer was cut at max_tokens")
        # Without a conversation the turn itself is the question (the rewrite may add synonyms).
        return Rewrite(query, (text,), self.method, standalone=text if history else "")


class _ListRewriter(_LLMRewriter):
    """Ask for a JSON list of up to ``n`` queries; the caller searches each and fuses."""

    key = "queries"
    purpose = "multi_query"

    def __init__(self, *, llm: str, n: int, include_original: bool, template: str) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10:
            raise ValueError(f"n must be an integer from 1 to 10, not {n!r}.")
        super().__init__(llm=llm, template=template)
        self.n = n
        self.include_original = include_original

    def _rewrite(
        self, query: str, *, collection: Collection, history: list[Turn], context: str = ""
    ) -> Rewrite:
        try:
            data = self._ask(
                query,
                history,
                context,
                schema=queries_schema(self.key, self.n),
                purpose=self.purpose,
                extra={"n": self.n},
            )
        except LLMError as e:
            return self._fallback(query, e)
        found = [" ".join(q.split()) for q in data[self.key] if q.strip()][: self.n]
        queries = [query] if self.include_original else []
        for text in found:
            if text.lower() not in {q.lower() for q in queries}:
                queries.append(text)
        if not queries:
            return self._fallback(query, "the model gave no usable query")
        return Rewrite(query, tuple(queries), self.method)


class MultiQueryRewriter(_ListRewriter):
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
        super().__init__(llm=llm, n=n, include_original=include_original, template=template)


class DecompositionRewriter(_ListRewriter):
    """Split a multi-aspect question into at most ``n`` sub-queries, searched and fused
    like multi-query (a one-aspect question comes back as itself)."""

    method = "decompose"
    key = "sub_queries"
    purpose = "decompose"

    def __init__(
        self,
        *,
        llm: str = "default",
        n: int = 4,
        include_original: bool = False,
        template: str = DECOMPOSE_TEMPLATE,
    ) -> None:
        super().__init__(llm=llm, n=n, include_original=include_original, template=template)


class HyDEQueryRewriter(_LLMRewriter):
    """Hypothetical document embeddings: retrieve with a passage the model imagines."""

    method = "hyde"

    def __init__(
        self, *, llm: str = "default", include_original: bool = True, template: str = HYDE_TEMPLATE
    ) -> None:
        super().__init__(llm=llm, template=template)
        self.include_original = include_original

    def _rewrite(
        self, query: str, *, collection: Collection, history: list[Turn], context: str = ""
    ) -> Rewrite:
        try:
            answer = self._ask(query, history, context, purpose="hyde", max_tokens=HYDE_TOKENS)
        except LLMError as e:
            return self._fallback(query, e)
        passage = answer.text.strip()[:ANSWER_CHARS]  # however long the server's answer
        if not passage:
            return self._fallback(query, "the model answered nothing")
        if answer.truncated and count_tokens(passage) < HYDE_TOKENS // 2:
            # cut short (by the budget, usually): a stub is no hypothetical answer
            return self._fallback(query, "the answer was cut at max_tokens")
        queries = (query, passage) if self.include_original else (passage,)
        return Rewrite(query, queries, self.method, details={"hypothetical": passage})
