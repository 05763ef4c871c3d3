"""The BaseEmbedder contract, checked against every embedder."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from retrieval.services.embedders.base import BaseEmbedder
from retrieval.services.embedders.local import LocalEmbedder
from retrieval.services.embedders.openai import OpenAIEmbedder
from tests.openai_server import OpenAIServer

TEXTS = [
    "Dense retrieval ranks passages by vector similarity.",
    "short",
    "A longer passage that talks about databases, indexes and how vectors are stored "
    "next to the text they were computed from.",
]


@pytest.fixture(scope="module")
def shared_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(dimension=32) as server:
        yield server


@pytest.fixture(params=["local", "openai"])
def embedder(request: pytest.FixtureRequest) -> BaseEmbedder:
    if request.param == "local":
        return request.getfixturevalue("local_embedder")
    server: OpenAIServer = request.getfixturevalue("shared_server")
    return OpenAIEmbedder(model="test-embedding", base_url=server.base_url, max_retries=0)


def test_is_a_base_embedder(embedder: BaseEmbedder) -> None:
    assert isinstance(embedder, BaseEmbedder)
    assert isinstance(embedder.model_name, str) and embedder.model_name
    assert isinstance(embedder.dimension, int) and embedder.dimension > 0


def test_batch_shape_and_dtype(embedder: BaseEmbedder) -> None:
    vectors = embedder.embed_batch(TEXTS)
    assert vectors.shape == (len(TEXTS), embedder.dimension)
    assert vectors.dtype == np.float32


def test_vectors_are_unit_length(embedder: BaseEmbedder) -> None:
    assert embedder.normalized
    norms = np.linalg.norm(embedder.embed_batch(TEXTS), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_embed_matches_batch_of_one(embedder: BaseEmbedder) -> None:
    for text in TEXTS:
        np.testing.assert_allclose(embedder.embed(text), embedder.embed_batch([text])[0], atol=1e-6)


def test_embed_query_shape(embedder: BaseEmbedder) -> None:
    vector = embedder.embed_query("what is dense retrieval?")
    assert vector.shape == (embedder.dimension,)
    assert vector.dtype == np.float32


def test_same_text_same_vector(embedder: BaseEmbedder) -> None:
    first, second = embedder.embed_batch([TEXTS[0], TEXTS[0]])
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_empty_batch(embedder: BaseEmbedder) -> None:
    assert embedder.embed_batch([]).shape == (0, embedder.dimension)


def test_check_returns_a_list(embedder: BaseEmbedder) -> None:
    assert embedder.check() == []


def test_local_and_openai_are_both_covered() -> None:
    assert {LocalEmbedder, OpenAIEmbedder} <= set(_all_subclasses(BaseEmbedder))


def _all_subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in [direct, *_all_subclasses(direct)]]
