"""Fixtures of the embedder tests: the local model (loaded once) and a scripted OpenAI server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval.services.embedders.local import LocalEmbedder
from tests.support.openai_server import OpenAIServer


@pytest.fixture(scope="session")
def local_embedder() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(dimension=16) as server:
        yield server
