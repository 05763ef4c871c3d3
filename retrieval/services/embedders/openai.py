"""Embeddings from OpenAI or any OpenAI-compatible server, through the official client."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.core import checks

from retrieval.exceptions import (
    DeadlineExceeded,
    DimensionMismatchError,
    EmbeddingError,
    EmbeddingUnavailableError,
)
from retrieval.services.clients.openai import build_client, resolve_api_key, retry_pause
from retrieval.services.core.tracing import current_deadline, remote_timeout
from retrieval.services.embedders.base import BaseEmbedder

#: Output lengths of OpenAI's models, so :attr:`OpenAIEmbedder.dimension` needs no request.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
PROBE_TEXT = "dimension probe"
OPENAI_BASE_URL = "https://api.openai.com/v1"


class OpenAIEmbedder(BaseEmbedder):
    """Embed texts through an OpenAI-style ``/embeddings`` endpoint, in batches.

    :param model: model id sent to the server.
    :param base_url: server URL ending in ``/v1``; ``None`` means OpenAI itself.
    :param api_key: defaults to ``OPENAI_API_KEY``, then to a placeholder when
        ``base_url`` is set (local servers without auth).
    :param dimensions: vector length; asked of the server when ``send_dimensions``.
    :param batch_size: texts sent in one request.
    :param max_retries: retries on 408/409/429/5xx, connection errors and timeouts, with
        exponential backoff (or the server's ``Retry-After``).
    :param timeout: seconds to wait for one response. Within a search, every attempt and
        wait stays within the search's deadline (``SEARCH_DEADLINE``).
    :param send_dimensions: send ``dimensions`` in requests; by default only for
        ``text-embedding-3*`` models with ``dimensions`` set, since most other
        servers reject the parameter.
    :param normalize: scale vectors to unit length.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        max_retries: int = 5,
        timeout: float = 30.0,
        send_dimensions: bool | None = None,
        normalize: bool = True,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty model id, e.g. 'text-embedding-3-small'.")
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be at least 1 or None, got {dimensions!r}.")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}.")
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries!r}.")
        if timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        if send_dimensions and dimensions is None:
            raise ValueError("send_dimensions=True needs dimensions set to the length to ask for.")
        if send_dimensions is None:
            send_dimensions = dimensions is not None and model.startswith("text-embedding-3")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.timeout = timeout
        self.send_dimensions = send_dimensions
        self.normalized = normalize
        self._lock = threading.Lock()
        self._client: Any = None
        self._learned_dimension: int | None = None

    @property
    def dimension(self) -> int:
        expected = self._expected_dimension()
        if expected is None:
            expected = self._request([PROBE_TEXT]).shape[1]  # also remembered by _as_matrix
        return expected

    @property
    def known_dimension(self) -> int | None:
        return self._expected_dimension()

    @property
    def model_name(self) -> str:
        return self.model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_batch() takes a sequence of texts, not one string; use embed().")
        texts = list(texts)
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        batches = [
            self._request(texts[start : start + self.batch_size])
            for start in range(0, len(texts), self.batch_size)
        ]
        vectors = np.concatenate(batches)
        if self.normalized:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.maximum(norms, 1e-12)
        return vectors.astype(np.float32, copy=False)

    def warm(self) -> None:
        """Import ``openai`` and build the client (about 2 s in a cold process); send nothing."""
        self._get_client()

    def check(self) -> list[checks.CheckMessage]:
        if self._resolve_api_key() is not None:
            return []
        where = f"RETRIEVAL['EMBEDDERS'][{self.alias!r}]" if self.alias else "OpenAIEmbedder"
        return [
            checks.Error(
                "The OpenAI embedder has no API key.",
                hint="Set OPENAI_API_KEY, or pass api_key in OPTIONS; for a local server "
                "without auth, pass its base_url.",
                obj=where,
                id="retrieval.E011",
            )
        ]

    def _expected_dimension(self) -> int | None:
        return self.dimensions or KNOWN_DIMENSIONS.get(self.model) or self._learned_dimension

    def _resolve_api_key(self) -> str | None:
        return resolve_api_key(self.api_key, self.base_url)

    def _get_client(self) -> Any:
        """Return the openai client, built once on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build_client()
        return self._client

    def _build_client(self) -> Any:
        return build_client(
            component="OpenAIEmbedder",
            base_url=self.base_url,
            api_key=self.api_key,
            max_retries=0,  # retried by _create, within the search's deadline
            timeout=self.timeout,
        )

    def _create(self, client: Any, params: dict[str, Any]) -> Any:
        """Ask for the embeddings, retrying as ``max_retries`` allows; each attempt and
        pause within the current deadline (a search's), none started past it."""
        import openai

        attempt = 0
        while True:
            attempt += 1
            seconds = remote_timeout(self.timeout)
            try:
                return client.with_options(timeout=seconds).embeddings.create(**params)
            except openai.OpenAIError as e:
                pause = retry_pause(e, attempt)
                if attempt > self.max_retries or pause is None:
                    raise
                limit = current_deadline()
                if limit is not None and pause >= limit.left():
                    raise DeadlineExceeded(f"no time left: {limit.what} has passed ({e})") from e
                time.sleep(pause)

    def _request(self, texts: list[str]) -> np.ndarray:
        """Return the vectors of one batch in input order, checking their count and length."""
        import openai

        client = self._get_client()
        params: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.send_dimensions:
            params["dimensions"] = self.dimensions
        try:
            response = self._create(client, params)
            items = sorted(response.data, key=lambda item: item.index)
            vectors = [item.embedding for item in items]
        except DeadlineExceeded as e:
            raise EmbeddingUnavailableError(f"{self._where()} did not answer: {e}") from e
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
            raise EmbeddingUnavailableError(
                f"{self._where()} did not answer (max_retries={self.max_retries}): {e}"
            ) from e
        except openai.OpenAIError as e:
            raise self._error(f"failed (max_retries={self.max_retries}): {e}") from e
        except (AttributeError, TypeError, ValueError) as e:
            raise self._error(f"returned a malformed answer: {e}") from e
        if [item.index for item in items] != list(range(len(texts))):
            raise self._error(
                f"answered {len(items)} vectors with bad indexes for {len(texts)} texts"
            )
        return self._as_matrix(vectors)

    def _as_matrix(self, vectors: list[list[float]]) -> np.ndarray:
        lengths = {len(vector) for vector in vectors}
        expected = self._expected_dimension()
        if expected is None and len(lengths) == 1:
            expected = self._learned_dimension = next(iter(lengths))
        if lengths != {expected}:
            received = ", ".join(str(length) for length in sorted(lengths))
            raise DimensionMismatchError(
                f"{self._where()} returned vectors of length {received}; "
                f"expected {expected or 'one length for all'}. "
                "Set dimensions to the model's real output length (and send_dimensions if the "
                "server should shorten vectors)."
            )
        try:
            return np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise self._error(f"returned vectors that are not lists of numbers: {e}") from e

    def _where(self) -> str:
        base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        return f"Embedding model {self.model!r} at {base_url}"

    def _error(self, problem: str) -> EmbeddingError:
        return EmbeddingError(f"{self._where()} {problem}")
