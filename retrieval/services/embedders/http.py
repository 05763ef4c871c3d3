"""Embeddings from Hugging Face Text Embeddings Inference and other ``/embed`` services."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval.exceptions import DimensionMismatchError, EmbeddingError, EmbeddingUnavailableError
from retrieval.services.clients.http import post_json
from retrieval.services.embedders.base import BaseEmbedder

__all__ = ["HTTPEmbedder"]

PROBE_TEXT = "dimension probe"


class HTTPEmbedder(BaseEmbedder):
    """Embed through ``POST {base_url}{path}`` with ``{"inputs": [...]}``, answered by a list
    of vectors: Text Embeddings Inference's ``/embed`` (and services speaking it).

    OPTIONS: ``base_url``, ``path`` ("/embed"), ``model`` (a name stored on collections,
    to tell embedding spaces apart), ``dimensions`` (asked of the service once if left
    out), ``api_key``, ``timeout``, ``max_retries``, ``batch_size``, ``truncate`` (let the
    service cut long inputs), ``normalize``. A service that does not answer raises
    ``EmbeddingUnavailableError`` (the API's 503), a malformed answer ``EmbeddingError``.
    """

    def __init__(
        self,
        *,
        base_url: str,
        path: str = "/embed",
        model: str = "tei",
        dimensions: int | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        batch_size: int = 32,
        truncate: bool = True,
        normalize: bool = True,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, not {base_url!r}.")
        if dimensions is not None and (isinstance(dimensions, bool) or dimensions < 1):
            raise ValueError(f"dimensions must be at least 1 or None, not {dimensions!r}.")
        if batch_size < 1 or max_retries < 0 or not timeout > 0:
            raise ValueError("batch_size and timeout must be positive, max_retries 0 or more.")
        self.url = base_url.rstrip("/") + "/" + path.lstrip("/")
        self.model = model
        self.dimensions = dimensions
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.batch_size = batch_size
        self.truncate = truncate
        self.normalized = normalize

    @property
    def dimension(self) -> int:
        if self.dimensions is None:
            self.dimensions = self._request([PROBE_TEXT]).shape[1]
        return self.dimensions

    @property
    def known_dimension(self) -> int | None:
        return self.dimensions

    @property
    def model_name(self) -> str:
        return self.model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed_batch() takes a sequence of texts, not one string; use embed().")
        texts = list(texts)
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        vectors = np.concatenate(
            [
                self._request(texts[start : start + self.batch_size])
                for start in range(0, len(texts), self.batch_size)
            ]
        )
        if self.normalized:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors.astype(np.float32, copy=False)

    def _request(self, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"inputs": texts, "truncate": self.truncate}
        answer = post_json(
            self.url,
            body,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            unavailable=lambda problem: EmbeddingUnavailableError(f"{self.url} {problem}"),
            failed=lambda problem: EmbeddingError(f"{self.url} {problem}"),
        )
        try:
            vectors = np.asarray(answer, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise EmbeddingError(f"{self.url} answered what is not a list of vectors: {e}") from e
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingError(
                f"{self.url} answered {vectors.shape} for {len(texts)} texts; expected one "
                "vector per text."
            )
        if self.dimensions is None:
            self.dimensions = vectors.shape[1]  # learned from the first answer
        if vectors.shape[1] != self.dimensions:
            raise DimensionMismatchError(
                f"{self.url} returned vectors of length {vectors.shape[1]}, not the configured "
                f"{self.dimensions}. Set dimensions to the model's output length."
            )
        if not np.isfinite(vectors).all():
            raise EmbeddingError(f"{self.url} answered vectors holding NaN or infinity.")
        return vectors
