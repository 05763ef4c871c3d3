"""HTTPEmbedder against a real HTTP server answering Text Embeddings Inference's ``/embed``."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.exceptions import DimensionMismatchError, EmbeddingError, EmbeddingUnavailableError
from retrieval.services.embedders.http import HTTPEmbedder
from retrieval.testing.embedders import EmbedderSuite
from tests.support.openai_server import OpenAIServer, Reply, status_fault


@pytest.fixture
def server():
    with OpenAIServer(dimension=16) as running:
        yield running


def test_vectors_come_back_in_order_batched_and_normalised(server):
    embedder = HTTPEmbedder(base_url=server.root_url, batch_size=2)
    vectors = embedder.embed_batch(["north", "east", "north east"])
    assert vectors.shape == (3, 16) and embedder.dimension == 16  # learned from the answer
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[1]  # shared words are near
    sent = [r.body["inputs"] for r in server.requests_to("/embed")]
    assert sent == [["north", "east"], ["north east"]]


def test_a_service_that_does_not_answer_is_unavailable(server):
    server.fail_next(status_fault(503))
    assert HTTPEmbedder(base_url=server.root_url).embed_batch(["x"]).shape == (1, 16)  # retried
    server.fail_next(*[status_fault(429)] * 2)
    with pytest.raises(EmbeddingUnavailableError, match="did not answer after 2 attempts"):
        HTTPEmbedder(base_url=server.root_url, max_retries=1).embed_batch(["x"])


def test_malformed_answers_and_wrong_lengths_are_errors(server):
    server.add_route("POST", "/embed", lambda request, s: Reply(200, [[1.0, "x"]]))
    with pytest.raises(EmbeddingError, match="not a list of vectors"):
        HTTPEmbedder(base_url=server.root_url, dimensions=2).embed_batch(["a"])
    server.add_route("POST", "/embed", lambda request, s: Reply(200, [[1.0, 0.0]]))
    with pytest.raises(DimensionMismatchError, match="length 2, not the configured 16"):
        HTTPEmbedder(base_url=server.root_url, dimensions=16).embed_batch(["a"])
    with pytest.raises(EmbeddingError, match="one vector per text"):
        HTTPEmbedder(base_url=server.root_url).embed_batch(["a", "b"])
    server.add_route("POST", "/embed", lambda request, s: Reply(400, {"error": "too long"}))
    with pytest.raises(EmbeddingError, match="HTTP 400"):
        HTTPEmbedder(base_url=server.root_url, dimensions=2).embed_batch(["a"])


class TestHTTPEmbedder(EmbedderSuite):
    def make_embedder(self, request):
        return HTTPEmbedder(base_url=request.getfixturevalue("server").root_url)
