"""The public service API: ``ingest``, ``search`` and the records they use.

Names load on first access, so importing :mod:`retrieval.services` before Django
is set up has no side effects.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ingest": "retrieval.services.ingestion.ingest",
    "Source": "retrieval.services.ingestion.ingest",
    "IngestResult": "retrieval.services.ingestion.ingest",
    "search": "retrieval.services.query.search",
    "search_batch": "retrieval.services.query.search",
    "asearch": "retrieval.services.query.search",
    "asearch_batch": "retrieval.services.query.search",
    "answer": "retrieval.services.answers.service",
    "aanswer": "retrieval.services.answers.service",
    "Answer": "retrieval.services.answers.records",
    "Pipeline": "retrieval.services.query.pipelines",
    "pack_context": "retrieval.services.query.packing",
    "PackedContext": "retrieval.services.query.packing",
    "Citation": "retrieval.services.query.packing",
    "Scope": "retrieval.services.access",
    "retrieve_tool": "retrieval.services.tools",
    "answer_tool": "retrieval.services.tools",
    "index_tool": "retrieval.services.tools",
    "collection_tools": "retrieval.services.tools",
    "run_tool_call": "retrieval.services.tools",
    "assistant_message": "retrieval.services.tools",
    "Tool": "retrieval.services.tools",
    "get_or_create_collection": "retrieval.services.ingestion.collections",
    "update_collection": "retrieval.services.ingestion.collections",
    "Filters": "retrieval.services.core.filters",
    "RetrievalResult": "retrieval.services.types",
    "warm_up": "retrieval.services.warmup",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
