"""One query's trace, LLM budget and deadline, carried by context variables.

:func:`traced` opens a :class:`QueryTrace` for a search; every stage that runs
inside it (a rewriter, an agentic round, an LLM call) records into the same trace
and charges the same :class:`Budget`, without the trace being passed around. It also
sets the search's :class:`Deadline` (``SEARCH_DEADLINE``): every remote call of the
search cuts its timeout to what is left (:func:`remote_timeout`), and a service may
narrow it to its own share (:func:`deadline`). Worker threads see both when started
through :func:`run_in_context`.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from retrieval.exceptions import BudgetExceeded, DeadlineExceeded

T = TypeVar("T")

_current: contextvars.ContextVar[QueryTrace | None] = contextvars.ContextVar(
    "retrieval_query_trace", default=None
)
_deadline: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "retrieval_deadline", default=None
)


@dataclass(frozen=True)
class LLMCall:
    """One chat completion as the trace records it."""

    model: str
    purpose: str
    prompt_tokens: int
    completion_tokens: int
    ms: float
    cached: bool = False
    attempts: int = 1
    error: str = ""
    #: the prompt tokens reserved before sending (the server's count, estimated)
    prompt_estimate: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Budget:
    """The most LLM work one query may do: calls, tokens and wall-clock seconds.

    ``None`` means no limit. Cached answers cost nothing.
    """

    def __init__(
        self,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
    ) -> None:
        for name, value in (
            ("max_calls", max_calls),
            ("max_tokens", max_tokens),
            ("max_seconds", max_seconds),
        ):
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise ValueError(f"{name} must be a positive number or None, not {value!r}.")
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.calls = 0
        self.tokens = 0
        self.started = time.monotonic()

    @classmethod
    def from_setting(cls, value: dict[str, Any] | None) -> Budget:
        return cls(**(value or {}))

    def remaining_seconds(self) -> float | None:
        if self.max_seconds is None:
            return None
        return self.max_seconds - (time.monotonic() - self.started)

    def remaining_tokens(self) -> int | None:
        return None if self.max_tokens is None else self.max_tokens - self.tokens

    def ensure_available(self, *, tokens_needed: int = 0) -> None:
        """Raise :class:`BudgetExceeded` unless one more call of that size fits."""
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise BudgetExceeded(f"LLM budget exhausted: {self.calls} of {self.max_calls} calls.")
        remaining = self.remaining_tokens()
        if remaining is not None and tokens_needed > remaining:
            raise BudgetExceeded(
                f"LLM budget exhausted: the call needs ~{tokens_needed} tokens, "
                f"{max(remaining, 0)} of {self.max_tokens} remain."
            )
        seconds = self.remaining_seconds()
        if seconds is not None and seconds <= 0:
            raise BudgetExceeded(f"LLM budget exhausted: {self.max_seconds} s elapsed.")

    def charge(self, tokens: int) -> None:
        self.calls += 1
        self.tokens += tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_calls": self.max_calls,
            "max_tokens": self.max_tokens,
            "max_seconds": self.max_seconds,
            "calls": self.calls,
            "tokens": self.tokens,
        }


@dataclass
class QueryTrace:
    """What happened while answering one query: stage events and LLM calls."""

    budget: Budget = field(default_factory=Budget)
    events: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: list[LLMCall] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def record(self, stage: str, **details: Any) -> dict[str, Any]:
        """Append an event (``stage`` plus JSON-able details) and return it."""
        event = {"stage": stage, **details}
        self.events.append(event)
        return event

    def to_dict(self) -> dict[str, Any]:
        calls = [asdict(call) for call in self.llm_calls]
        return {
            "events": self.events,
            "llm_calls": calls,
            "llm_tokens": sum(call.total_tokens for call in self.llm_calls if not call.cached),
            "budget": self.budget.to_dict(),
            "ms": round((time.monotonic() - self.started) * 1000, 2),
        }


def current_trace() -> QueryTrace | None:
    """Return the trace of the query being answered, if one is open."""
    return _current.get()


@contextmanager
def traced(budget: Budget | None = None) -> Iterator[QueryTrace]:
    """Open a trace for one query, under the ``SEARCH_DEADLINE``, or join the one already
    open (nested searches share its budget and its deadline)."""
    existing = _current.get()
    if existing is not None:
        yield existing
        return
    trace = QueryTrace(budget=budget or _default_budget())
    seconds = search_deadline_setting()
    token = _current.set(trace)
    try:
        with deadline(seconds, f"the search's SEARCH_DEADLINE ({seconds} s)"):
            yield trace
    finally:
        _current.reset(token)


@dataclass(frozen=True)
class Deadline:
    """When the remote calls under it must be done (a ``time.monotonic()`` value), and
    what set it, for the error that says so."""

    at: float
    what: str

    def left(self) -> float:
        return self.at - time.monotonic()


def current_deadline() -> Deadline | None:
    """Return the deadline remote calls are under, if any (the narrowest one set)."""
    return _deadline.get()


@contextmanager
def deadline(seconds: float | None, what: str) -> Iterator[Deadline | None]:
    """Give the remote calls inside at most ``seconds`` more (``None``: no new limit),
    never past a deadline already set; ``what`` names it in errors."""
    outer = _deadline.get()
    if seconds is None or (outer is not None and outer.left() <= seconds):
        yield outer
        return
    token = _deadline.set(Deadline(time.monotonic() + seconds, what))
    try:
        yield _deadline.get()
    finally:
        _deadline.reset(token)


def remote_timeout(timeout: float) -> float:
    """Return the seconds a remote call (one attempt) may wait: ``timeout`` cut to what the
    current deadline leaves. Raise :class:`DeadlineExceeded` when nothing is left."""
    current = _deadline.get()
    if current is None:
        return timeout
    left = current.left()
    if left <= 0:
        raise DeadlineExceeded(f"no time left: {current.what} has passed")
    return min(timeout, left)


def run_in_context(function: Callable[..., T]) -> Callable[..., T]:
    """Wrap ``function`` so a worker thread runs it inside the caller's trace."""
    context = contextvars.copy_context()
    return lambda *args, **kwargs: context.run(function, *args, **kwargs)


def _default_budget() -> Budget:
    from retrieval.conf import retrieval_settings

    return Budget.from_setting(retrieval_settings.LLM_BUDGET)


def search_deadline_setting() -> float | None:
    """Return ``SEARCH_DEADLINE``, or raise ``ValueError`` naming what is wrong with it."""
    from retrieval.conf import retrieval_settings

    seconds = retrieval_settings.SEARCH_DEADLINE
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
    ):
        raise ValueError(
            f'RETRIEVAL["SEARCH_DEADLINE"] must be a positive number of seconds or None, '
            f"not {seconds!r}."
        )
    return seconds
