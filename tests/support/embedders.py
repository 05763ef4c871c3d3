"""Embedders for tests that fail, hang or cancel at a chosen call.

Each is the keyword embedder of :mod:`retrieval.testing` (answers worked out by hand)
with one twist; the database, indexing and ranking they feed are the real ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval.exceptions import EmbeddingError
from retrieval.testing import KeywordEmbedder


class FailingEmbedder(KeywordEmbedder):
    """A keyword embedder whose calls fail from the ``fail_from_call``-th one on."""

    def __init__(self, fail_from_call: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fail_from_call = fail_from_call

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls + 1 >= self.fail_from_call:
            self.calls += 1
            raise EmbeddingError(f"embedding service unavailable (call {self.calls})")
        return super().embed_batch(texts)


class HangingEmbedder(KeywordEmbedder):
    """A keyword embedder whose ``hang_on_call``-th call never returns (within ``hang`` s).

    The crash test uses it to have a worker stopped in the middle of a run, at a known
    point, when it kills the worker: no timing decides where the run is.
    """

    def __init__(self, hang_on_call: int = 0, hang: float = 120.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.hang_on_call = hang_on_call
        self.hang = hang

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if self.hang_on_call and self.calls + 1 == self.hang_on_call:
            import time

            time.sleep(self.hang)
        return super().embed_batch(texts)


class PoisonEmbedder(KeywordEmbedder):
    """A keyword embedder that refuses any batch containing the word ``poison``."""

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if any("poison" in text.lower() for text in texts):
            raise EmbeddingError("the embedding service refused this text")
        return super().embed_batch(texts)


class CancellingEmbedder(KeywordEmbedder):
    """A keyword embedder that cancels the running IndexRun on its ``cancel_on_call``-th call,
    as a user pressing "cancel" while a worker embeds would."""

    def __init__(self, cancel_on_call: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cancel_on_call = cancel_on_call

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls + 1 == self.cancel_on_call:
            from retrieval.models import IndexRun
            from retrieval.services.ingestion.runs import cancel_run

            cancel_run(IndexRun.objects.get(status=IndexRun.Status.RUNNING))
        return super().embed_batch(texts)


class InterruptingEmbedder(KeywordEmbedder):
    """A keyword embedder that calls ``interrupt`` (a dotted path) on its ``interrupt_on_call``-th
    call, as an editor changing the site while a worker embeds would."""

    def __init__(self, interrupt: str, interrupt_on_call: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.interrupt = interrupt
        self.interrupt_on_call = interrupt_on_call

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls + 1 == self.interrupt_on_call:
            from django.utils.module_loading import import_string

            import_string(self.interrupt)()
        return super().embed_batch(texts)


class WindowEmbedder(KeywordEmbedder):
    """A keyword embedder that reads only ``window`` tokens of a text: its words, plus two."""

    def __init__(self, window: int = 16, **kwargs) -> None:
        super().__init__(**kwargs)
        self.window = window

    @property
    def max_input_tokens(self) -> int:
        return self.window

    def count_input_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) + 2 for text in texts]


class ConnectionCuttingEmbedder(KeywordEmbedder):
    """A keyword embedder that ends the server side of the database connection ``pid``
    (``cut_pid``, set by the test) when it embeds: PostgreSQL going away in the middle of
    a search, while the BM25 leg's query waits in psycopg's pipeline."""

    cut_pid: int | None = None
    cut_url: str = ""

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import psycopg

        pid, ConnectionCuttingEmbedder.cut_pid = ConnectionCuttingEmbedder.cut_pid, None
        if pid is not None:
            with psycopg.connect(self.cut_url, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])
        return super().embed_batch(texts)
