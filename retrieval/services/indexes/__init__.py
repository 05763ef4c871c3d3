"""Vector indexes (``RETRIEVAL['INDEXES']``): pgvector by default, external engines optional."""

from __future__ import annotations

from retrieval.models import Collection
from retrieval.services.indexes.base import BaseIndex
from retrieval.services.registry import indexes


def index_for(collection: Collection) -> BaseIndex:
    """Return the index ranking a collection's vectors (``InvalidComponentError`` if unset)."""
    return indexes[collection.index or "default"]


__all__ = ["BaseIndex", "index_for"]
