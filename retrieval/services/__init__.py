"""The public service API: ``ingest``, ``search`` and the records they use.

Names load on first access, so importing :mod:`retrieval.services` before Django
is set up has no side effects.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ingest": "retrieval.services.indexing",
    "Source": "retrieval.services.indexing",
    "IngestResult": "retrieval.services.indexing",
    "search": "retrieval.services.search",
    "search_batch": "retrieval.services.search",
    "asearch": "retrieval.services.search",
    "asearch_batch": "retrieval.services.search",
    "Pipeline": "retrieval.services.pipelines",
    "pack_context": "retrieval.services.context",
    "PackedContext": "retrieval.services.context",
    "Citation": "retrieval.services.context",
    "Scope": "retrieval.services.access",
    "retrieve_tool": "retrieval.services.tools",
    "index_tool": "retrieval.services.tools",
    "collection_tools": "retrieval.services.tools",
    "run_tool_call": "retrieval.services.tools",
    "assistant_message": "retrieval.services.tools",
    "Tool": "retrieval.services.tools",
    "get_or_create_collection": "retrieval.services.collections",
    "Filters": "retrieval.services.filters",
    "RetrievalResult": "retrieval.services.types",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
