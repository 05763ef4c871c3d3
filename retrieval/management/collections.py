"""The collection a command names, with its vector index."""

from __future__ import annotations

from django.core.management.base import CommandError

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.access import Scope
from retrieval.services.indexes import index_for
from retrieval.services.indexes.base import BaseIndex


def collection_and_index(name: str) -> tuple[Collection, BaseIndex]:
    """Return the collection named (or slugged) ``name`` and its index; ``CommandError``
    if there is no such collection or its index is not configured."""
    try:
        collection = Scope.ALL.collection(name)
        return collection, index_for(collection)
    except RetrievalError as e:
        raise CommandError(str(e)) from e
