"""The language-model interface: chat messages in, text or validated JSON out."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from django.core import checks

from retrieval.exceptions import LLMError
from retrieval.services.llms.answers import answer_token_bound, parse_answer

Message = Mapping[str, str]


@dataclass(frozen=True)
class LLMAnswer:
    """A completion: its text, and ``data`` when a JSON schema was asked for."""

    text: str
    data: Any = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    finish_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        """Whether the answer was cut at ``max_tokens`` (``finish_reason`` ``"length"``)."""
        return self.finish_reason == "length"


class BaseLLM(ABC):
    """Answer chat messages. :meth:`complete_json` validates against a JSON schema.

    Implementations charge the query's :class:`~retrieval.services.query.tracing.Budget`
    and record each call in its trace.
    """

    alias: str = ""

    @abstractmethod
    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: str = "",
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> LLMAnswer:
        """Return the model's answer to ``messages`` (asking for JSON if a schema is given)."""

    def complete_json(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any],
        purpose: str = "",
        max_tokens: int | None = None,
    ) -> Any:
        """Return the answer parsed and validated against ``schema``.

        ``max_tokens`` defaults to the schema's bound (:func:`answer_token_bound`), so any
        valid answer fits. An invalid answer gets one repair request (the answer and
        what is wrong with it); a second invalid answer raises :class:`LLMError`.
        """
        messages = list(messages)
        max_tokens = max_tokens or answer_token_bound(schema)
        answer = self.complete(messages, purpose=purpose, json_schema=schema, max_tokens=max_tokens)
        problem = json_problem(answer.text, schema)
        if problem is None:
            return parse_answer(strip_code_fence(answer.text))
        if answer.truncated:  # a cut answer is not malformed: asking again would cut it again
            raise LLMError(
                f"{self.alias or type(self).__name__} answer for {purpose or 'a call'} was cut "
                f"at max_tokens ({answer.completion_tokens} tokens): {problem}"
            )
        repair = [
            *messages,
            {"role": "assistant", "content": answer.text},
            {
                "role": "user",
                "content": f"That answer is not valid: {problem}. Reply again with only a "
                f"JSON value matching this schema: {json.dumps(schema)}",
            },
        ]
        answer = self.complete(
            repair, purpose=f"{purpose} (repair)", json_schema=schema, max_tokens=max_tokens
        )
        problem = json_problem(answer.text, schema)
        if problem is not None:
            raise LLMError(
                f"{self.alias or type(self).__name__} gave no valid JSON for {purpose or 'a call'} "
                f"after one repair: {problem}"
            )
        return parse_answer(strip_code_fence(answer.text))

    def check(self) -> list:
        return []


def check_llm_alias(owner: str, llm: str) -> list:
    """Return a check error if component ``owner`` names an LLM that is not configured."""
    from retrieval.services.registry import llms

    if llm in llms:
        return []
    return [
        checks.Error(
            f"{owner} uses LLM {llm!r}, which is not in RETRIEVAL['LLMS'].",
            hint="Configure it, e.g. RETRIEVAL['LLMS'] = {'default': 'openai:gpt-4o-mini'}.",
            id="retrieval.E007",
        )
    ]


def json_problem(text: str, schema: Mapping[str, Any]) -> str | None:
    """Return why ``text`` is not JSON matching ``schema``, or ``None`` if it is."""
    try:  # validated as the model wrote it: cleaning may empty a string it may not be
        data = parse_answer(strip_code_fence(text), cleaned=False)
    except (TypeError, ValueError, RecursionError) as e:
        return f"not JSON ({e})"
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        return f"at {where}: {e.message}"
    return None


def strip_code_fence(text: str) -> str:
    """Remove a Markdown code fence some models wrap JSON in."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()
