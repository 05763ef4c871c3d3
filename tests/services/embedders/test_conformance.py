"""Every embedder of the app through the public suite (retrieval.testing.embedders)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval.services.embedders.base import BaseEmbedder
from retrieval.services.embedders.local import LocalEmbedder
from retrieval.services.embedders.openai import OpenAIEmbedder
from retrieval.testing import KeywordEmbedder
from retrieval.testing.embedders import EmbedderSuite
from tests.support.openai_server import OpenAIServer


@pytest.fixture(scope="module")
def shared_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(dimension=32) as server:
        yield server


class TestLocalEmbedder(EmbedderSuite):
    def make_embedder(self, request):
        return request.getfixturevalue("local_embedder")


class TestOpenAIEmbedder(EmbedderSuite):
    def make_embedder(self, request):
        server = request.getfixturevalue("shared_server")
        return OpenAIEmbedder(model="test-embedding", base_url=server.base_url, max_retries=0)


class TestKeywordEmbedder(EmbedderSuite):
    def make_embedder(self, request):
        return KeywordEmbedder()


def test_every_embedder_of_the_app_is_in_the_suite() -> None:
    assert {LocalEmbedder, OpenAIEmbedder, KeywordEmbedder} <= set(_all_subclasses(BaseEmbedder))


def _all_subclasses(cls: type) -> list[type]:
    return [sub for direct in cls.__subclasses__() for sub in [direct, *_all_subclasses(direct)]]
