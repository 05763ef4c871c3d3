"""The language-model interface: chat messages in, text or validated JSON out."""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema
from django.core import checks
from django.core.cache import caches

from retrieval.exceptions import BudgetExceeded, DeadlineExceeded, LLMError
from retrieval.services.core.tracing import LLMCall, QueryTrace, current_trace, remote_timeout
from retrieval.services.llms.answers import answer_token_bound, excerpt, parse_answer

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

    :meth:`complete` does what every model needs the same way: it serves identical calls
    from the Django cache ``cache`` (never a blank, cut or invalid answer), checks and
    charges the query's :class:`~retrieval.services.core.tracing.Budget` (a text answer's
    ``max_tokens`` cut to what is left; a JSON call not sent unless its whole
    ``max_tokens`` fits; the timeout cut to the seconds the budget and the search's
    deadline leave) and records each call in the query's trace. An implementation
    writes :meth:`_prepare` (the request) and :meth:`_send` (the call), and may refine
    :meth:`_estimate` and :meth:`_observe`.
    """

    alias: str = ""
    #: The model's name in traces.
    model: str = ""
    #: Seconds one call may take, retries included.
    timeout: float = 30.0
    #: Django cache alias for identical calls (``None``: no cache), and its lifetime.
    cache: str | None = None
    cache_timeout: int = 24 * 3600
    #: Tokens the model reads and writes in one call, prompt and answer together
    #: (``None``: unknown, no prompt is fitted to it).
    context_window: int | None = None

    def complete(
        self,
        messages: Sequence[Message],
        *,
        purpose: str = "",
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> LLMAnswer:
        """Return the model's answer to ``messages`` (asking for JSON if a schema is given),
        within the query's budget."""

        request = self._prepare(messages, json_schema, max_tokens)
        key = self._cache_key(request)
        trace = current_trace()
        cached = self._cached(key, purpose, trace)
        if cached is not None:
            return cached
        timeout, prompt_estimate = self._budgeted(request, json_schema, trace)
        started = time.monotonic()
        attempts = [0]
        try:
            answer = self._send(request, timeout, attempts, prompt_estimate)
        except LLMError as e:
            failed = LLMAnswer(text="", extra={"error": excerpt(str(e))})
            self._trace_call(trace, failed, purpose, started, attempts, prompt_estimate)
            raise
        self._observe(request, answer)
        self._trace_call(trace, answer, purpose, started, attempts, prompt_estimate)
        self._keep(key, answer, json_schema)
        return answer

    def stream(
        self, messages: Sequence[Message], *, purpose: str = "", max_tokens: int | None = None
    ) -> Iterator[str]:
        """Yield the model's text answer to ``messages`` in pieces as the server writes them,
        under the same cache, budget and trace as :meth:`complete`.

        The whole stream ends within the call's timeout (cut to the budget and the
        search's deadline), however slowly the server writes: a server that stops
        writing, fails mid-answer or ends without finishing raises :class:`LLMError`
        after the pieces already yielded (and records the failed call in the trace).
        """
        request = self._prepare(messages, None, max_tokens)
        key = self._cache_key(request)
        trace = current_trace()
        cached = self._cached(key, purpose, trace)
        if cached is not None:
            yield cached.text
            return
        timeout, prompt_estimate = self._budgeted(request, None, trace)
        started = time.monotonic()
        attempts = [0]
        pieces: list[str] = []
        try:
            ending = None
            for item in within(
                self._send_stream(request, timeout, attempts, prompt_estimate),
                started + timeout,
                self._name_for_errors(),
            ):
                if isinstance(item, LLMAnswer):
                    ending = item
                    continue
                pieces.append(item)
                yield item
            if ending is None or not ending.finish_reason:
                raise LLMError(f"{self._name_for_errors()} ended its stream before the answer.")
        except LLMError as e:
            failed = LLMAnswer(text="", extra={"error": excerpt(str(e))})
            self._trace_call(trace, failed, purpose, started, attempts, prompt_estimate)
            raise
        answer = replace(ending, text="".join(pieces))
        if not answer.completion_tokens:  # a server may not report a stream's usage
            from retrieval.services.clients.tokens import count_tokens

            answer = replace(
                answer, prompt_tokens=prompt_estimate, completion_tokens=count_tokens(answer.text)
            )
        self._observe(request, answer)
        self._trace_call(trace, answer, purpose, started, attempts, prompt_estimate)
        self._keep(key, answer, None)

    def _cached(self, key: str, purpose: str, trace: QueryTrace | None) -> LLMAnswer | None:
        """Return the cached answer under ``key`` (recorded in the trace), if any."""
        cached = caches[self.cache].get(key) if self.cache else None
        if cached is None:
            return None
        if trace is not None:
            trace.llm_calls.append(
                LLMCall(
                    self.model,
                    purpose,
                    cached["prompt_tokens"],
                    cached["completion_tokens"],
                    0.0,
                    cached=True,
                )
            )
        return LLMAnswer(**cached, cached=True)

    def _budgeted(
        self,
        request: dict[str, Any],
        json_schema: Mapping[str, Any] | None,
        trace: QueryTrace | None,
    ) -> tuple[float, int]:
        """Fit ``request`` to the budget (its ``max_tokens`` lowered) and return the call's
        timeout and prompt estimate; raise :class:`BudgetExceeded` when it does not fit."""
        self._connect()  # before the deadline is computed: a cold import is not the call's time
        prompt_estimate = self._estimate(request)
        timeout = self.timeout
        if trace is not None:
            whole = request["max_tokens"] if json_schema is not None else 1
            trace.budget.ensure_available(tokens_needed=prompt_estimate + whole)
            remaining = trace.budget.remaining_tokens()
            if remaining is not None:  # the answer may not overrun what is left
                request["max_tokens"] = max(
                    1, min(request["max_tokens"], remaining - prompt_estimate)
                )
            seconds = trace.budget.remaining_seconds()
            if seconds is not None:
                timeout = min(timeout, seconds)
        try:
            return remote_timeout(timeout), prompt_estimate
        except DeadlineExceeded as e:
            raise BudgetExceeded(f"{self._name_for_errors()} not called: {e}") from e

    def _trace_call(
        self,
        trace: QueryTrace | None,
        answer: LLMAnswer,
        purpose: str,
        started: float,
        attempts: list[int],
        prompt_estimate: int,
    ) -> None:
        """Charge the budget for a call (a failed one costs no tokens) and record it."""
        if trace is None:
            return
        ms = (time.monotonic() - started) * 1000
        trace.budget.charge(answer.prompt_tokens + answer.completion_tokens)
        trace.llm_calls.append(
            LLMCall(
                self.model,
                purpose,
                answer.prompt_tokens,
                answer.completion_tokens,
                ms,
                attempts=attempts[0],
                error=answer.extra.get("error", ""),
                prompt_estimate=prompt_estimate,
            )
        )

    def _keep(self, key: str, answer: LLMAnswer, json_schema: Mapping[str, Any] | None) -> None:
        if self._cacheable(answer, json_schema):
            caches[self.cache].set(
                key,
                {
                    "text": answer.text,
                    "prompt_tokens": answer.prompt_tokens,
                    "completion_tokens": answer.completion_tokens,
                    "finish_reason": answer.finish_reason,
                },
                self.cache_timeout,
            )

    def _name_for_errors(self) -> str:
        return self.alias or type(self).__name__

    @abstractmethod
    def _prepare(
        self,
        messages: Sequence[Message],
        json_schema: Mapping[str, Any] | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        """Return the request to send: a dict holding at least ``messages`` and ``max_tokens``
        (which :meth:`complete` may lower to fit the budget)."""

    @abstractmethod
    def _send(
        self, request: dict[str, Any], timeout: float, attempts: list[int], prompt_estimate: int
    ) -> LLMAnswer:
        """Send ``request`` and return the answer, within ``timeout`` seconds; count each
        request sent in ``attempts[0]``; raise :class:`LLMError` when it fails."""

    def _send_stream(
        self, request: dict[str, Any], timeout: float, attempts: list[int], prompt_estimate: int
    ) -> Iterator[str | LLMAnswer]:
        """Send ``request`` asking for a stream; yield the text's pieces as they come, then
        an :class:`LLMAnswer` (no text) with the usage and the finish reason; raise
        :class:`LLMError` when it fails. Blocking reads are fine: :meth:`stream` reads
        this from a thread and gives up at the deadline. By default the whole answer
        comes as one piece."""
        answer = self._send(request, timeout, attempts, prompt_estimate)
        yield answer.text
        yield replace(answer, text="")

    def _connect(self) -> None:  # noqa: B027 (optional hook)
        """Do the slow set-up (imports, clients) before the call's deadline starts."""

    def warm(self) -> None:
        """Do the slow set-up now, so no search waits for it; send nothing."""
        self._connect()

    def overrun(
        self, messages: Sequence[Message], *, json_schema: Mapping[str, Any] | None = None
    ) -> int:
        """Return by how many tokens ``messages`` and the answer they ask for overrun the
        context window (0 or less: they fit), counted as the budget counts them.

        The answer is the schema's bound for a JSON call, else the LLM's ``max_tokens``.
        """
        if self.context_window is None:
            return 0
        bound = answer_token_bound(json_schema) if json_schema is not None else None
        request = self._prepare(messages, json_schema, bound)
        return self._estimate(request) + request["max_tokens"] - self.context_window

    def _estimate(self, request: dict[str, Any]) -> int:
        """Return how many prompt tokens ``request`` will cost (the budget's estimate)."""
        from retrieval.services.clients.tokens import count_tokens

        return sum(count_tokens(str(m.get("content", ""))) + 4 for m in request["messages"])

    def _observe(self, request: dict[str, Any], answer: LLMAnswer) -> None:  # noqa: B027
        """Learn from the tokens the server reported (an optional hook)."""

    def _cache_key(self, request: dict[str, Any]) -> str:
        payload = json.dumps({"model": self.model, **request}, sort_keys=True, default=str)
        return "retrieval:llm:" + hashlib.sha256(payload.encode()).hexdigest()

    def _cacheable(self, answer: LLMAnswer, schema: Mapping[str, Any] | None) -> bool:
        """Whether to keep ``answer``: never a blank, cut or (for JSON) invalid one, which
        would otherwise be served again for a day."""
        if not self.cache or not answer.text.strip() or answer.truncated:
            return False
        return schema is None or json_problem(answer.text, schema) is None

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
            {"role": "assistant", "content": excerpt(answer.text)},
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


def within(pieces: Iterator[Any], deadline: float, name: str) -> Iterator[Any]:
    """Yield ``pieces``, read on a worker thread, until ``deadline`` (``time.monotonic()``);
    raise :class:`LLMError` when it passes first.

    A blocked socket read cannot be interrupted, so the worker is left to its own
    timeout and closes the stream when it wakes; the reader is never kept waiting.
    """
    passed: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()

    def read() -> None:
        try:
            for piece in pieces:
                if stop.is_set():
                    break
                passed.put(("piece", piece))
            passed.put(("end", None))
        except BaseException as e:  # noqa: BLE001 (handed to the reader, which raises it)
            passed.put(("error", e))
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()

    threading.Thread(target=read, daemon=True, name="retrieval-llm-stream").start()
    try:
        while True:
            try:
                kind, value = passed.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                raise LLMError(f"{name} timed out mid-stream: its time budget ran out.") from None
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()


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
        return excerpt(f"not JSON ({e})")
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        return excerpt(f"at {where}: {e.message}")  # the message quotes the answer
    return None


def strip_code_fence(text: str) -> str:
    """Remove a Markdown code fence some models wrap JSON in."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()
