"""Chat completion through the ``openai`` client, against any OpenAI-compatible server."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from django.core import checks

from retrieval.exceptions import BudgetExceeded, LLMError
from retrieval.services.clients.openai import build_client, resolve_api_key, retry_pause
from retrieval.services.llms.answers import clean, excerpt
from retrieval.services.llms.base import BaseLLM, LLMAnswer, Message
from retrieval.services.llms.prompts import PromptEstimator, count_prompt_tokens

#: ``response_format`` modes: OpenAI's strict schema, plain JSON mode (the schema goes
#: in the prompt), llama.cpp's schema-constrained JSON mode, or nothing.
JSON_MODES = ("json_schema", "json_object", "llama_cpp", "none")
#: The context of the smallest chat models a site is likely to serve (Llama 3 8B, SmolLM2):
#: a server started with less (``--n_ctx 2048``) needs ``context_window`` set to it.
DEFAULT_CONTEXT_WINDOW = 8192
MIN_CONTEXT_WINDOW = 256


class OpenAIChatLLM(BaseLLM):
    """A chat model behind an OpenAI-style ``/chat/completions`` endpoint.

    :param model: model id sent to the server.
    :param base_url: server URL ending in ``/v1`` (vLLM, Ollama, llama.cpp server, Azure's
        OpenAI-compatible endpoint); ``None`` means OpenAI itself.
    :param api_key: defaults to ``OPENAI_API_KEY``, then to a placeholder when ``base_url``
        is set.
    :param timeout: seconds for one call, retries included (capped by what the search's
        deadline and ``LLM_BUDGET`` ``max_seconds`` leave). A local server needs prompt
        tokens / its prompt speed plus answer tokens / its generation speed.
    :param max_retries: the client's retries, with exponential backoff, on 408/409/429/5xx,
        connection errors and timeouts.
    :param temperature: sampling temperature (0 keeps answers repeatable and cacheable).
    :param max_tokens: completion tokens asked for per text call (a JSON call asks for
        its schema's bound instead).
    :param json_mode: how JSON is requested (see :data:`JSON_MODES`).
    :param cache: Django cache alias for identical calls, or ``None`` to disable.
    :param cache_timeout: seconds a cached answer lives.
    :param context_window: tokens the served model takes in one call, prompt and answer
        together (a llama.cpp server's ``--n_ctx``); prompts of passages are fitted to it
        (:func:`~retrieval.services.llms.fitting.fit_passages`). ``None``: not fitted.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        temperature: float = 0.0,
        max_tokens: int = 512,
        json_mode: str = "json_object",
        cache: str | None = "default",
        cache_timeout: int = 24 * 3600,
        context_window: int | None = DEFAULT_CONTEXT_WINDOW,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty model id, e.g. 'gpt-4o-mini'.")
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries!r}.")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens!r}.")
        if context_window is not None and (
            not isinstance(context_window, int) or context_window < MIN_CONTEXT_WINDOW
        ):
            raise ValueError(
                f"context_window must be None or at least {MIN_CONTEXT_WINDOW} tokens, "
                f"not {context_window!r}."
            )
        if json_mode not in JSON_MODES:
            choices = ", ".join(JSON_MODES)
            raise ValueError(f"json_mode must be one of {choices}, not {json_mode!r}.")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.json_mode = json_mode
        self.cache = cache
        self.cache_timeout = cache_timeout
        self.context_window = context_window
        self._client: Any = None
        self._lock = threading.Lock()
        self.prompt_estimator = PromptEstimator()

    def check(self) -> list[checks.CheckMessage]:
        if resolve_api_key(self.api_key, self.base_url) is not None:
            return []
        return [
            checks.Error(
                f"The LLM {self.alias!r} ({self.model}) has no API key.",
                hint="Set OPENAI_API_KEY, or pass api_key in OPTIONS; for a local server "
                "without auth, pass its base_url.",
                id="retrieval.E012",
            )
        ]

    def _prepare(
        self,
        messages: Sequence[Message],
        json_schema: Mapping[str, Any] | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        return self._params(messages, json_schema, max_tokens or self.max_tokens)

    def _connect(self) -> None:
        self._get_client()  # imports openai (~2 s in a cold process) and builds the client

    def _estimate(self, request: dict[str, Any]) -> int:
        return self.prompt_estimator.estimate(request["messages"])

    def _observe(self, request: dict[str, Any], answer: LLMAnswer) -> None:
        self.prompt_estimator.observe(request["messages"], answer.prompt_tokens)

    def _params(
        self, messages: Sequence[Message], schema: Mapping[str, Any] | None, max_tokens: int
    ) -> dict[str, Any]:
        messages = [dict(m) for m in messages]
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": max_tokens,
        }
        if schema is None or self.json_mode == "none":
            return params
        if self.json_mode == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": dict(schema)},
            }
        elif self.json_mode == "llama_cpp":
            params["response_format"] = {"type": "json_object", "schema": dict(schema)}
        else:
            params["response_format"] = {"type": "json_object"}
        if self.json_mode != "json_schema":  # say the shape, since the server may not enforce it
            messages.insert(
                0,
                {
                    "role": "system",
                    "content": "Answer with only a JSON value matching this JSON schema: "
                    + json.dumps(schema),
                },
            )
        return params

    def _cache_key(self, request: dict[str, Any]) -> str:
        payload = json.dumps({"base_url": self.base_url, **request}, sort_keys=True, default=str)
        return "retrieval:llm:" + hashlib.sha256(payload.encode()).hexdigest()

    def _send(
        self, params: dict[str, Any], timeout: float, attempts: list[int], prompt_estimate: int
    ) -> LLMAnswer:
        """Send ``params``, retrying as ``max_retries`` allows, all within ``timeout`` seconds.

        ``attempts[0]`` counts the requests sent.
        """
        response = self._create(params, timeout, attempts, prompt_estimate)
        try:
            choice = response.choices[0]
            text = clean(choice.message.content or "")
        except (AttributeError, IndexError, TypeError, ValueError) as e:
            raise LLMError(f"{self._name()} returned a malformed answer: {excerpt(str(e))}") from e
        usage = getattr(response, "usage", None)
        return LLMAnswer(
            text=text,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            finish_reason=getattr(choice, "finish_reason", "") or "",
        )

    def _send_stream(
        self, params: dict[str, Any], timeout: float, attempts: list[int], prompt_estimate: int
    ) -> Iterator[str | LLMAnswer]:
        """Send ``params`` with ``stream=True`` (retried until the answer starts); yield
        each chunk's text, then the usage and finish reason."""
        import httpx
        import openai

        params = {**params, "stream": True, "stream_options": {"include_usage": True}}
        chunks = self._create(params, timeout, attempts, prompt_estimate)
        finish, usage = "", None
        try:
            for chunk in chunks:
                usage = getattr(chunk, "usage", None) or usage
                for choice in chunk.choices or ():
                    finish = choice.finish_reason or finish
                    if choice.delta and choice.delta.content:
                        yield choice.delta.content
        except (openai.OpenAIError, httpx.HTTPError) as e:
            raise LLMError(f"{self._name()} failed mid-stream: {excerpt(str(e))}") from e
        except (AttributeError, TypeError, ValueError) as e:
            raise LLMError(f"{self._name()} streamed a malformed chunk: {excerpt(str(e))}") from e
        finally:
            chunks.close()
        yield LLMAnswer(
            text="",
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            finish_reason=finish,
        )

    def _create(
        self, params: dict[str, Any], timeout: float, attempts: list[int], prompt_estimate: int
    ) -> Any:
        """Return the server's response to ``params`` (a stream's once it starts), retrying
        as ``max_retries`` allows within ``timeout`` seconds."""
        import openai

        client = self._get_client()
        if timeout <= 0:
            raise BudgetExceeded("LLM budget exhausted: no time left for another call.")
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            attempts[0] += 1
            try:
                return client.with_options(timeout=left).chat.completions.create(**params)
            except openai.APITimeoutError as e:
                raise LLMError(
                    f"{self._name()} timed out after {timeout:.1f} s ({attempts[0]} "
                    f"attempt(s)) on a prompt of ~{prompt_estimate} tokens and up to "
                    f"{params['max_tokens']} answer tokens: {e}. A local server needs about "
                    "prompt tokens / its prompt speed + answer tokens / its generation speed: "
                    "raise the LLM's timeout (and SEARCH_DEADLINE, LLM_BUDGET max_seconds) or "
                    "send less (e.g. the LLM reranker's max_passages and passage_chars)."
                ) from e
            except openai.OpenAIError as e:
                pause = retry_pause(e, attempts[0])
                retry = attempts[0] <= self.max_retries and pause is not None
                if not retry or time.monotonic() + pause >= deadline:
                    raise LLMError(
                        f"{self._name()} failed (max_retries={self.max_retries}) after "
                        f"{attempts[0]} attempt(s): {excerpt(str(e))}"
                    ) from e
                time.sleep(pause)
            except (AttributeError, IndexError, TypeError, ValueError) as e:
                raise LLMError(
                    f"{self._name()} returned a malformed answer: {excerpt(str(e))}"
                ) from e

    def _name(self) -> str:
        return f"LLM {self.alias or self.model!r}"

    def _get_client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = build_client(
                        component=f"LLM {self.alias or self.model!r}",
                        base_url=self.base_url,
                        api_key=self.api_key,
                        max_retries=0,  # retried by _request, within the call's deadline
                        timeout=self.timeout,
                    )
        return self._client


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """Return the app's own count of ``messages`` (before any server's chat template)."""
    return count_prompt_tokens(messages)
