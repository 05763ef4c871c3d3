"""Offline tiktoken loading, token counts and token-to-character offsets."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from hypothesis import given

from retrieval.exceptions import InvalidComponentError
from retrieval.services.chunkers import tokens
from retrieval.services.chunkers.tokens import count_tokens, get_encoding, token_boundaries
from retrieval.testing.chunkers import PROPERTY_SETTINGS, texts

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point tiktoken at an empty cache, forget loaded encodings and block downloads."""
    cache_dir = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
    monkeypatch.setattr(tokens, "_encodings", {})
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def no_network(blobpath: str) -> bytes:
        raise OSError(f"test blocks downloading {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    return cache_dir


def cache_file(cache_dir: Path) -> Path:
    return cache_dir / hashlib.sha1(CL100K_URL.encode()).hexdigest()


def test_get_encoding_seeds_an_empty_cache_without_network(fresh_cache: Path) -> None:
    encoding = get_encoding("cl100k_base")

    assert encoding.name == "cl100k_base"
    assert encoding.encode_ordinary("hello world") == [15339, 1917]
    assert hashlib.sha256(cache_file(fresh_cache).read_bytes()).hexdigest() == CL100K_SHA256
    assert [path.name for path in fresh_cache.iterdir()] == [cache_file(fresh_cache).name]


def test_get_encoding_replaces_a_corrupt_cached_file(fresh_cache: Path) -> None:
    fresh_cache.mkdir()
    cache_file(fresh_cache).write_bytes(b"not a rank file")

    assert get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert hashlib.sha256(cache_file(fresh_cache).read_bytes()).hexdigest() == CL100K_SHA256


def test_get_encoding_loads_o200k_offline(fresh_cache: Path) -> None:
    assert len(get_encoding("o200k_base").encode_ordinary("hello world")) == 2


def test_get_encoding_is_cached_and_thread_safe(fresh_cache: Path) -> None:
    results: list[tiktoken.Encoding] = []

    def load() -> None:
        results.append(get_encoding("cl100k_base"))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 8
    assert all(result is results[0] for result in results)
    assert get_encoding("cl100k_base") is results[0]


def test_disabled_cache_without_network_names_the_fix(
    fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")

    with pytest.raises(InvalidComponentError, match="'cl100k_base'.*TIKTOKEN_CACHE_DIR"):
        get_encoding("cl100k_base")


def test_unknown_encoding_is_named_in_the_error(fresh_cache: Path) -> None:
    with pytest.raises(InvalidComponentError, match="'no_such_encoding'"):
        get_encoding("no_such_encoding")


@pytest.mark.parametrize(
    ("text", "encoding", "expected"),
    [
        ("hello world", "cl100k_base", 2),
        ("tiktoken is great!", "cl100k_base", 6),
        ("hello world", "o200k_base", 2),
        ("", "cl100k_base", 0),
        # Special-token text is counted as plain text, not refused.
        ("<|endoftext|>", "cl100k_base", 7),
    ],
)
def test_count_tokens_known_counts(text: str, encoding: str, expected: int) -> None:
    assert count_tokens(text, encoding) == expected


def test_count_tokens_replaces_lone_surrogates() -> None:
    assert count_tokens("a\ud800b") == count_tokens("a\ufffdb")


def test_token_boundaries_give_each_token_start() -> None:
    assert token_boundaries("hello world") == [0, 5, 11]
    assert token_boundaries("") == [0]


def test_token_boundaries_never_point_inside_a_character() -> None:
    # The emoji is two tokens; both start at the emoji's one code point.
    assert token_boundaries("a\U0001f600b") == [0, 1, 1, 2, 3]


@PROPERTY_SETTINGS
@given(text=texts)
def test_token_boundaries_match_tiktoken_offsets(text: str) -> None:
    encoding = get_encoding("cl100k_base")
    _, offsets = encoding.decode_with_offsets(encoding.encode_ordinary(text))

    assert token_boundaries(text) == [*offsets, len(text)]
