"""The local embedder with a disk cache of vectors by text (``bench/.cache``).

Benchmarks that index the same texts again (another chunk size, another system)
embed them once; the vectors are the local embedder's own. Used as
``"BACKEND": "cached_embedder.CachedLocalEmbedder"`` with ``bench/`` on the path.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.services.embedders.local import LocalEmbedder

CACHE = Path(__file__).resolve().parent / ".cache"
_lock = threading.Lock()


class CachedLocalEmbedder(LocalEmbedder):
    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found = _read(keys)
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        if missing:
            vectors = super().embed_batch([t for _, t in missing])
            rows = [
                (k, v.astype(np.float32).tobytes())
                for (k, _), v in zip(missing, vectors, strict=True)
            ]
            _write(rows)
            found.update(rows)
        vectors = [np.frombuffer(found[k], dtype=np.float32) for k in keys]
        return np.stack(vectors) if vectors else np.zeros((0, self.dimension), np.float32)


def _connect() -> sqlite3.Connection:
    CACHE.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(CACHE / "embeddings.sqlite", timeout=60)
    db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, v BLOB)")
    return db


def _read(keys: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    with _lock, _connect() as db:
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(db.execute(f"SELECT k, v FROM v WHERE k IN ({marks})", part))  # noqa: S608
    return found


def _write(rows: list[tuple[str, bytes]]) -> None:
    with _lock, _connect() as db:
        db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)
