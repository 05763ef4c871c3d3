"""Search a collection with a named retriever."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.registry import retrievers
from retrieval.services.tracing import traced
from retrieval.services.types import SearchResults


class CollectionNotFound(RetrievalError, LookupError):
    """No collection has that name or slug."""


def get_collection(collection: Collection | str) -> Collection:
    """Return a collection given itself, its name or its slug."""
    if isinstance(collection, Collection):
        return collection
    found = (
        Collection.objects.filter(name=collection).first()
        or Collection.objects.filter(slug=collection).first()
    )
    if found is None:
        names = list(Collection.objects.values_list("name", flat=True)[:20])
        raise CollectionNotFound(
            f"No collection named {collection!r}; existing: {', '.join(names) or '(none)'}."
        )
    return found


def retriever_alias(collection: Collection, retriever: str | None = None) -> str:
    """Return the retriever to use: the one asked for, the collection's, or the default."""
    return retriever or collection.default_retriever or retrieval_settings.DEFAULT_RETRIEVER


def search(
    query: str,
    *,
    collection: Collection | str,
    retriever: str | None = None,
    top_k: int = 10,
    filters: Filters | Mapping[str, Any] | None = None,
) -> SearchResults:
    """Return the ``top_k`` best chunks of ``collection`` for ``query``, with its trace."""
    target = get_collection(collection)
    component = retrievers[retriever_alias(target, retriever)]
    with traced() as trace:
        results = component.retrieve(query, collection=target, top_k=top_k, filters=filters)
    return SearchResults(results, trace=trace.to_dict())
