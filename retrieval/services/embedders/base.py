"""The embedder interface: texts -> fixed-length vectors."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class BaseEmbedder(ABC):
    """Embed texts into vectors of :attr:`dimension` floats.

    ``embed_batch`` returns a float32 array of shape ``(len(texts), dimension)``;
    vectors are L2-normalised when :attr:`normalized` is true. Queries go through
    :meth:`embed_query`, which models with query prefixes override.
    """

    alias: str = ""
    normalized: bool = True

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""

    @property
    def known_dimension(self) -> int | None:
        """Return the dimension if it is known without calling a model or a server."""
        return self.dimension

    @property
    @abstractmethod
    def model_name(self) -> str:
        """Name of the model, stored on collections to detect a changed embedding space."""

    @abstractmethod
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Return one vector per text, shape ``(len(texts), dimension)``."""

    def embed(self, text: str) -> np.ndarray:
        """Return the vector of one passage."""
        return self.embed_batch([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        """Return the vector of a search query."""
        return self.embed(text)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Return the vectors of several search queries, those :meth:`embed_query` gives.

        One :meth:`embed_batch` call when queries are embedded as passages are (the
        default :meth:`embed_query`); otherwise one :meth:`embed_query` per text.
        """
        if type(self).embed_query is BaseEmbedder.embed_query:
            return self.embed_batch(list(texts))
        return (
            np.stack([self.embed_query(text) for text in texts]) if texts else self.embed_batch([])
        )

    @property
    def max_input_tokens(self) -> int | None:
        """The most tokens of a text the model reads, ``None`` if not known.

        A model truncates a longer text: what is past the window never reaches the
        vector. Ingestion splits chunks whose indexed text would not fit
        (:meth:`count_input_tokens` must then count them).
        """
        return None

    def count_input_tokens(self, texts: Sequence[str]) -> list[int]:
        """Return how many of the model's tokens each text is, special tokens included."""
        raise NotImplementedError(f"{type(self).__name__} does not count its tokens.")

    def warm(self) -> None:  # noqa: B027 (optional hook)
        """Load now what the first query would load (a model, a client), so no search
        waits for it (:func:`~retrieval.services.warmup.warm_up`)."""

    def check(self) -> list:
        """Return Django check messages about this embedder's configuration."""
        return []
