"""Running Hugging Face-style transformer encoders exported to ONNX, without torch.

Shared by the local embedder and the cross-encoder reranker: a ``tokenizers``
tokenizer, an onnxruntime CPU session, and batches padded to their longest input.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from retrieval.exceptions import MissingDependencyError

RUNTIME_HINT = 'pip install "django-retrieval[local]" (onnxruntime and tokenizers)'

T = TypeVar("T")
#: What :func:`shared` loaded, by key: one copy a process, whatever its threads.
_loaded: dict[Hashable, Any] = {}
_loading = threading.Lock()


def shared(key: Hashable, load: Callable[[], T]) -> T:
    """Return ``load()``, called once a process for ``key``: a model's session or tokenizer,
    which every thread's instance of a component uses (components are per thread; a
    session runs concurrent calls, and a model loaded per thread would cost its memory
    and its 1-7 s load again in each)."""
    try:
        return _loaded[key]
    except KeyError:
        pass
    with _loading:
        if key not in _loaded:
            _loaded[key] = load()
        return _loaded[key]


def require_module(name: str, hint: str = RUNTIME_HINT) -> Any:
    """Import an optional runtime, naming how to install it if it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise MissingDependencyError(f"{name} is not installed: {hint}.") from e


def load_tokenizer(path: Path, *, max_length: int, error: type[Exception]) -> Any:
    """Return the tokenizer at ``path``, truncating at ``max_length`` and not padding."""
    tokenizers = require_module("tokenizers")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as e:
        raise error(f"Cannot read the tokenizer at {path}: {e}") from e
    # Exported tokenizer files often pad every text to a fixed length; pad per batch instead.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer


def load_session(path: Path, *, threads: int | None, error: type[Exception]) -> Any:
    """Return an onnxruntime CPU session for the model at ``path``."""
    ort = require_module("onnxruntime")
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    # Idle worker threads must sleep, not spin: in a web process the CPU they would
    # burn after each batch belongs to PostgreSQL and other requests.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        raise error(f"Cannot load the ONNX model at {path}: {e}") from e


def batch_inputs(session: Any, encodings: list[Any]) -> dict[str, np.ndarray]:
    """Return the model's inputs for ``encodings``, zero-padded to the longest one."""
    width = max(len(encoding.ids) for encoding in encodings)
    input_ids = np.zeros((len(encodings), width), dtype=np.int64)
    attention_mask = np.zeros_like(input_ids)
    token_type_ids = np.zeros_like(input_ids)
    for row, encoding in enumerate(encodings):
        length = len(encoding.ids)
        input_ids[row, :length] = encoding.ids
        attention_mask[row, :length] = encoding.attention_mask
        token_type_ids[row, :length] = encoding.type_ids
    available = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }
    return {i.name: available[i.name] for i in session.get_inputs() if i.name in available}
