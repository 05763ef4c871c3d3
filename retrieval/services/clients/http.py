"""JSON over HTTP for services without an official client (rerank and embedding APIs).

One POST with a timeout, retried with exponential backoff (or the server's
``Retry-After``) on connection errors, timeouts, 408, 409, 429 and 5xx; a service that
still does not answer raises :class:`~retrieval.exceptions.ServiceUnavailableError`'s
subclass the caller names, any other failure its plain error. Within a search, every
attempt and wait stays within the search's deadline (:func:`remote_timeout`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from retrieval.exceptions import DeadlineExceeded, RetrievalError
from retrieval.services.core.tracing import current_deadline, remote_timeout

__all__ = ["post_json"]

RETRIED = {408, 409, 429}
#: Longest wait between attempts, whatever the server's Retry-After says.
MAX_BACKOFF = 8.0


def post_json(
    url: str,
    body: dict[str, Any],
    *,
    api_key: str | None,
    timeout: float,
    max_retries: int,
    unavailable: Callable[[str], RetrievalError],
    failed: Callable[[str], RetrievalError],
) -> Any:
    """POST ``body`` to ``url``; return the decoded JSON answer.

    The current deadline (a search's) caps every attempt and the waits between them:
    past it the call stops as unavailable.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    problem = ""
    for attempt in range(max_retries + 1):
        try:
            seconds = remote_timeout(timeout)
        except DeadlineExceeded as e:
            raise unavailable(f"{e} ({problem or 'nothing sent'})") from e
        retry_after: float | None = None
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=seconds)
        except httpx.TimeoutException as e:
            problem = f"timed out after {seconds:g} s: {e}"
        except httpx.TransportError as e:
            problem = f"{type(e).__name__}: {e}"
        else:
            if response.status_code < 300:
                try:
                    return response.json()
                except ValueError as e:
                    raise failed(f"answered what is not JSON: {e}") from e
            problem = f"HTTP {response.status_code}: {response.text[:300]}"
            if response.status_code not in RETRIED and response.status_code < 500:
                raise failed(problem)
            header = response.headers.get("retry-after", "")
            retry_after = float(header) if header.isdigit() else None
        if attempt < max_retries:
            wait = min(MAX_BACKOFF, retry_after if retry_after is not None else 0.25 * 2**attempt)
            limit = current_deadline()
            if limit is not None:
                wait = min(wait, max(0.0, limit.left()))
            time.sleep(wait)
    raise unavailable(f"did not answer after {max_retries + 1} attempts: {problem}")
