"""Measure an answer function on a golden set's questions (``retrieval_evaluate --answers``).

The answer function is ``retrieval.answer`` unless another is named by its dotted path:
any callable taking the question and ``retrieval.answer``'s keyword arguments
(``collection``, ``scope``, ``pipeline``, ``retriever``, ``llm``, ``extractive``) and returning an
answer-like object (:class:`~retrieval.services.quality.answer_metrics.AnswerLike`). That
is the seam for measuring another RAG chain against the same golden set, and for tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.utils.module_loading import import_string

from retrieval.exceptions import RetrievalError
from retrieval.services.quality.answer_metrics import (
    AnswerLike,
    AnswerQuestion,
    run_answers,
    score_answers,
)

#: The answer function measured when none is named.
DEFAULT_ANSWER_FUNCTION = "retrieval.answer"


class AnswerFunctionMissing(RetrievalError):
    """The answer function named cannot be imported, or is not callable."""


def answer_function(path: str | None = None, **options: Any) -> Callable[[str], AnswerLike]:
    """Return ``question -> answer``: the callable at ``path`` with ``options`` bound.

    Raise :class:`AnswerFunctionMissing` when it cannot be imported.
    """
    path = path or DEFAULT_ANSWER_FUNCTION
    try:
        function = import_string(path)
    except ImportError as e:
        raise AnswerFunctionMissing(f"Cannot import the answer function {path!r}: {e}") from e
    if not callable(function):
        raise AnswerFunctionMissing(f"The answer function {path!r} is not callable.")
    return lambda question: function(question, **options)


def measure_answers(
    answer_fn: Callable[[str], AnswerLike],
    questions: Iterable[AnswerQuestion],
    *,
    chunk_target: Callable[[int], str | None] | None = None,
    on_question: Callable[[], None] | None = None,
) -> dict[str, float | int]:
    """Ask ``answer_fn`` every question and return the means of the answer metrics."""
    cases = run_answers(answer_fn, questions, chunk_target=chunk_target, on_question=on_question)
    return score_answers(cases)
