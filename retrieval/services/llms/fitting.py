"""Fit a prompt of passages to the model's context window.

A stage that shows the model a list of passages (the agentic selector and judge, the
listwise reranker) builds its prompt through :func:`fit_passages`: passages are dropped
from the end (callers list them best first) until the prompt and the longest answer it
asks for fit the LLM's ``context_window``, counted as the query's budget counts them;
a first passage that does not fit alone is cut. A server with a 2,048-token context
answered 400 to an agentic search's 4,783-token prompt, and the search fell back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.exceptions import LLMError
from retrieval.services.core.tracing import current_trace
from retrieval.services.llms.base import BaseLLM, Message

#: ``build(passages)`` returns the prompt's messages and the answer's JSON schema (or None).
Builder = Callable[[Sequence[str]], tuple[list[Message], Mapping[str, Any] | None]]


@dataclass(frozen=True)
class FittedPrompt:
    """A prompt that fits: its messages, its answer's schema, and how many of the given
    passages it shows (the first ``shown``; the last of them cut if ``cut_to`` is set)."""

    messages: list[Message]
    schema: Mapping[str, Any] | None
    shown: int
    cut_to: int | None = None


def fit_passages(
    llm: BaseLLM, passages: Sequence[str], build: Builder, *, purpose: str
) -> FittedPrompt:
    """Return the prompt ``build`` makes of as many of ``passages`` as fit ``llm``'s
    context window, and say in the query's trace what was left out.

    Raises :class:`LLMError` when not even a few characters of one passage fit (the
    question alone fills the window), so the stage falls back as for a failed call.
    """

    def fits(texts: Sequence[str]) -> bool:
        messages, schema = build(texts)
        return llm.overrun(messages, json_schema=schema) <= 0

    if not passages or fits(passages):
        return FittedPrompt(*build(passages), shown=len(passages))
    # Each passage only adds tokens: the most that fit is found by bisection.
    shown = _most(len(passages) - 1, lambda n: fits(passages[:n]))
    kept, cut_to = list(passages[:shown]), None
    if shown == 0:
        first = passages[0]
        cut_to = _most(len(first), lambda chars: fits([first[:chars]]))
        if cut_to == 0:
            raise LLMError(
                f"The {purpose} prompt does not fit the LLM's context window of "
                f"{llm.context_window} tokens, even with one passage cut short."
            )
        kept, shown = [first[:cut_to]], 1
    trace = current_trace()
    if trace is not None:
        trace.record(
            "fit",
            purpose=purpose,
            context_window=llm.context_window,
            passages=len(passages),
            shown=shown,
            dropped=len(passages) - shown,
            cut_to_chars=cut_to,
        )
    return FittedPrompt(*build(kept), shown=shown, cut_to=cut_to)


def numbered(passages: Sequence[str]) -> str:
    """Return passages as prompts show them: ``[id] text``, a blank line apart."""
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(passages))


def _most(high: int, ok: Callable[[int], bool]) -> int:
    """Return the largest n in [0, high] with ``ok(n)`` (``ok`` holds up to some n), else 0."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ok(middle) else (low, middle - 1)
    return low
