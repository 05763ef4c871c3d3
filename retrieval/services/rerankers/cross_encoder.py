"""Rerank with a cross-encoder exported to ONNX (query and passage read together)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from django.core import checks

from retrieval.exceptions import MissingDependencyError, RetrievalError
from retrieval.services.clients.onnx import batch_inputs, load_session, load_tokenizer, shared
from retrieval.services.rerankers.base import BaseReranker
from retrieval.services.types import RetrievalResult


class CrossEncoderError(RetrievalError):
    """The cross-encoder model cannot be loaded or run."""


class CrossEncoderReranker(BaseReranker):
    """Score (query, passage) pairs with a cross-encoder, in batches, on the CPU.

    ``model_dir`` holds ``model.onnx`` and ``tokenizer.json``, as Hugging Face
    exports a sequence-classification model (e.g. ``cross-encoder/ms-marco-MiniLM-L-6-v2``
    through ``optimum-cli export onnx``). Its first output is one logit per pair (or two,
    of which the last is "relevant"). Only the first ``max_candidates`` results are
    scored; scoring stops once ``time_budget`` seconds are spent (after at least one
    batch). Results left unscored keep their order after the scored ones. Pairs are
    scored ``batch_size`` at a time, each cut to ``max_length`` tokens, on ``threads``
    onnxruntime threads (``None``: one per core).
    """

    def __init__(
        self,
        *,
        model_dir: str | Path,
        batch_size: int = 16,
        max_candidates: int = 100,
        time_budget: float | None = None,
        max_length: int = 512,
        threads: int | None = None,
    ) -> None:
        if batch_size < 1 or max_candidates < 1 or max_length < 8:
            raise ValueError("batch_size and max_candidates must be >= 1, max_length >= 8.")
        if time_budget is not None and time_budget <= 0:
            raise ValueError(f"time_budget must be positive seconds or None, not {time_budget!r}.")
        self.model_dir = Path(model_dir)
        self.batch_size = batch_size
        self.max_candidates = max_candidates
        self.time_budget = time_budget
        self.max_length = max_length
        self.threads = threads
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def check(self) -> list:
        missing = [
            n for n in ("model.onnx", "tokenizer.json") if not (self.model_dir / n).is_file()
        ]
        if not missing:
            return []
        return [
            checks.Error(
                f"Cross-encoder reranker {self.alias!r} has no {' or '.join(missing)} in "
                f"{self.model_dir}.",
                hint="Export the model to ONNX with its tokenizer.json into that folder.",
                id="retrieval.E013",
            )
        ]

    def score_pairs(self, query: str, texts: list[str]) -> np.ndarray:
        """Return one relevance logit per text (all of them, ignoring the budget)."""
        return np.concatenate(
            [
                self._run_batch(query, texts[start : start + self.batch_size])
                for start in range(0, len(texts), self.batch_size)
            ]
            or [np.empty(0, dtype=np.float32)]
        )

    def _scores(
        self, query: str, results: list[RetrievalResult]
    ) -> tuple[list[float], dict[str, object]]:
        started = time.monotonic()
        candidates = results[: self.max_candidates]
        scored: list[float] = []
        for start in range(0, len(candidates), self.batch_size):
            spent = time.monotonic() - started
            if scored and self.time_budget is not None and spent > self.time_budget:
                break  # the first batch always runs, so a tiny budget still reranks
            batch = [r.chunk.content for r in candidates[start : start + self.batch_size]]
            scored.extend(float(x) for x in self._run_batch(query, batch))
        floor = min(scored, default=0.0)
        unscored = len(results) - len(scored)
        # Unscored results follow the scored ones, in their previous order.
        scores = scored + [floor - 1.0 - i for i in range(unscored)]
        return scores, {"scored": len(scored), "unscored": unscored}

    def warm(self) -> None:
        self._load()

    def _run_batch(self, query: str, texts: list[str]) -> np.ndarray:
        tokenizer, session = self._load()
        encodings = tokenizer.encode_batch([(query, text) for text in texts])
        try:
            logits = np.asarray(session.run(None, batch_inputs(session, encodings))[0])
        except Exception as e:
            raise CrossEncoderError(f"The cross-encoder failed on a batch: {e}") from e
        return logits.reshape(len(texts), -1)[:, -1].astype(np.float32)

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    for name in ("model.onnx", "tokenizer.json"):
                        if not (self.model_dir / name).is_file():
                            raise MissingDependencyError(
                                f"No {name} in the cross-encoder folder {self.model_dir}."
                            )
                    tokenizer = shared(
                        ("tokenizer", self.model_dir / "tokenizer.json", self.max_length),
                        lambda: load_tokenizer(
                            self.model_dir / "tokenizer.json",
                            max_length=self.max_length,
                            error=CrossEncoderError,
                        ),
                    )
                    session = shared(
                        ("session", self.model_dir / "model.onnx", self.threads),
                        lambda: load_session(
                            self.model_dir / "model.onnx",
                            threads=self.threads,
                            error=CrossEncoderError,
                        ),
                    )
                    self._loaded = (tokenizer, session)
        return self._loaded
