"""The embedder suite, and :class:`KeywordEmbedder`, whose similarities are worked out by hand."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from retrieval.services.embedders.base import BaseEmbedder
from retrieval.testing.base import Suite

__all__ = ["EmbedderSuite", "KeywordEmbedder"]


class KeywordEmbedder(BaseEmbedder):
    """One axis per keyword: a text's vector counts the keywords it contains.

    With keywords ``("north", "east", "up")``, "north north east" embeds to
    ``[2, 1, 0]`` normalised, so cosine similarities are easy to compute by hand.
    A text with no keyword gets a small constant vector.
    """

    def __init__(
        self, keywords: Sequence[str] = ("north", "east", "up"), model: str = "keywords"
    ) -> None:
        self.keywords = tuple(keywords)
        self.model = model
        self.calls = 0

    @property
    def dimension(self) -> int:
        return len(self.keywords)

    @property
    def model_name(self) -> str:
        return self.model

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            words = text.lower().split()
            counts = [sum(w.strip(".,;:!?") == k for w in words) for k in self.keywords]
            vectors[i] = counts if any(counts) else [0.01] * self.dimension
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)


class EmbedderSuite(Suite):
    """The ``BaseEmbedder`` contract. Define :meth:`make_embedder` (a fixture may back it)."""

    TEXTS: ClassVar[list[str]] = [
        "Dense retrieval ranks passages by vector similarity.",
        "short",
        "A longer passage that talks about databases, indexes and how vectors are stored "
        "next to the text they were computed from.",
    ]

    def make_embedder(self, request: pytest.FixtureRequest) -> BaseEmbedder:
        raise NotImplementedError("Return the embedder under test.")

    @pytest.fixture
    def embedder(self, request: pytest.FixtureRequest) -> BaseEmbedder:
        return self.make_embedder(request)

    def test_is_a_base_embedder(self, embedder: BaseEmbedder) -> None:
        assert isinstance(embedder, BaseEmbedder)
        assert isinstance(embedder.model_name, str) and embedder.model_name
        assert isinstance(embedder.dimension, int) and embedder.dimension > 0

    def test_batch_shape_and_dtype(self, embedder: BaseEmbedder) -> None:
        vectors = embedder.embed_batch(self.TEXTS)
        assert vectors.shape == (len(self.TEXTS), embedder.dimension)
        assert vectors.dtype == np.float32

    def test_vectors_are_unit_length(self, embedder: BaseEmbedder) -> None:
        assert embedder.normalized
        norms = np.linalg.norm(embedder.embed_batch(self.TEXTS), axis=1)
        np.testing.assert_allclose(norms, 1.0, atol=1e-5)

    def test_embed_matches_a_batch_of_one(self, embedder: BaseEmbedder) -> None:
        for text in self.TEXTS:
            np.testing.assert_allclose(
                embedder.embed(text), embedder.embed_batch([text])[0], atol=1e-6
            )

    def test_a_query_embeds_to_one_vector(self, embedder: BaseEmbedder) -> None:
        vector = embedder.embed_query("what is dense retrieval?")
        assert vector.shape == (embedder.dimension,)
        assert vector.dtype == np.float32

    def test_the_same_text_gives_the_same_vector(self, embedder: BaseEmbedder) -> None:
        first, second = embedder.embed_batch([self.TEXTS[0], self.TEXTS[0]])
        np.testing.assert_allclose(first, second, atol=1e-6)

    def test_an_empty_batch(self, embedder: BaseEmbedder) -> None:
        assert embedder.embed_batch([]).shape == (0, embedder.dimension)

    def test_check_returns_a_list(self, embedder: BaseEmbedder) -> None:
        assert embedder.check() == []
