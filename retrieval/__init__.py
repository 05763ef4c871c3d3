"""django-retrieval: a drop-in Django app for retrieval on PostgreSQL + pgvector.

Importing this package has no side effects. The search facade is here —
``retrieval.search``, ``retrieval.search_batch``, ``retrieval.asearch``,
``retrieval.asearch_batch``, the grounded answers ``retrieval.answer``,
``retrieval.aanswer`` and ``retrieval.answer_stream`` (its events as the model writes
it), and ``retrieval.Scope`` (each call needs ``user=`` or
``scope=``) — loaded on first use; the rest of the service API lives
in :mod:`retrieval.services`.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_FACADE = ("search", "search_batch", "asearch", "asearch_batch")
_ANSWERS = ("answer", "aanswer", "answer_stream")
__all__ = [*_FACADE, *_ANSWERS, "Scope", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Scope":
        from retrieval.services.access import Scope

        return Scope
    if name in _FACADE:
        from retrieval.services.query import search as module

        return getattr(module, name)
    if name in _ANSWERS:
        from retrieval.services.answers import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
