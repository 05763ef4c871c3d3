"""The ``openai`` client as the app's OpenAI-compatible components build it."""

from __future__ import annotations

import os
from typing import Any

from retrieval.exceptions import InvalidComponentError

#: Sent as the API key to servers that need none (the client refuses an empty key).
PLACEHOLDER_API_KEY = "unused"


def resolve_api_key(api_key: str | None, base_url: str | None) -> str | None:
    """Return the key to send: the given one, ``OPENAI_API_KEY``, or a placeholder for
    a local server (``base_url`` set) that needs none."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key and base_url:
        key = PLACEHOLDER_API_KEY
    return key or None


def build_client(
    *, component: str, base_url: str | None, api_key: str | None, max_retries: int, timeout: float
) -> Any:
    """Return an ``openai.OpenAI`` client, or raise naming the missing key."""
    import openai

    key = resolve_api_key(api_key, base_url)
    if key is None:
        raise InvalidComponentError(
            f"{component} has no API key: set OPENAI_API_KEY or pass api_key; "
            "for a local OpenAI-compatible server without auth, pass its base_url."
        )
    return openai.OpenAI(base_url=base_url, api_key=key, max_retries=max_retries, timeout=timeout)


def retry_pause(error: Exception, attempt: int) -> float | None:
    """Return seconds to wait before retrying after ``error``, or ``None`` if it is final.

    Connection errors, 408, 409, 429 and 5xx are retried (the server's ``retry-after``
    honoured, else 0.5 s doubling per attempt, at most 8 s), as the ``openai`` client does.
    """
    import openai

    if isinstance(error, openai.APIConnectionError):
        return min(8.0, 0.5 * 2 ** (attempt - 1))
    if not isinstance(error, openai.APIStatusError):
        return None
    status = error.status_code
    if status not in (408, 409, 429) and status < 500:
        return None
    headers = error.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, "")) * scale
        except ValueError:
            continue
        if 0 < value <= 60:
            return value
    return min(8.0, 0.5 * 2 ** (attempt - 1))
