"""Search a collection with a named retriever."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection, connections

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.filters import Filters
from retrieval.services.registry import retrievers
from retrieval.services.types import RetrievalResult


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
) -> list[RetrievalResult]:
    """Return the ``top_k`` best chunks of ``collection`` for ``query``."""
    target = get_collection(collection)
    return retrievers[retriever_alias(target, retriever)].retrieve(
        query, collection=target, top_k=top_k, filters=filters
    )


def search_batch(
    queries: Sequence[str],
    *,
    collection: Collection | str,
    retriever: str | None = None,
    top_k: int = 10,
    filters: Filters | Mapping[str, Any] | None = None,
    max_workers: int | None = None,
) -> list[list[RetrievalResult]]:
    """Return the ``top_k`` best chunks for each of ``queries``, in the order given.

    :param queries: the query texts.
    :param collection: a collection, or its name or slug; shared by every query.
    :param retriever: retriever alias (default: the collection's, then ``DEFAULT_RETRIEVER``).
    :param top_k: results per query.
    :param filters: :class:`Filters` (or their mapping form) applied to every query.
    :param max_workers: threads running queries at once (default ``BATCH_SEARCH_WORKERS``).

    Outside a transaction the queries run concurrently on worker threads, each with
    its own database connection, closed when the thread has no query left. Inside a
    transaction (``atomic``, ``ATOMIC_REQUESTS``) they run one after another on the
    caller's connection instead, so they see the transaction's uncommitted writes.
    The first query that fails (in input order) raises its error.
    """
    texts = list(queries)
    if not all(isinstance(text, str) for text in texts):
        raise ValueError("queries must be strings.")
    target = get_collection(collection)
    engine = retrievers[retriever_alias(target, retriever)]
    parsed = Filters.parse(filters)
    workers = min(max_workers or int(retrieval_settings.BATCH_SEARCH_WORKERS), len(texts))

    def run(text: str) -> list[RetrievalResult]:
        return engine.retrieve(text, collection=target, top_k=top_k, filters=parsed)

    if workers <= 1 or connection.in_atomic_block:
        return [run(text) for text in texts]
    outcomes: list[Any] = [None] * len(texts)
    pending = iter(enumerate(texts))
    lock = threading.Lock()

    def worker() -> None:
        try:
            while True:
                with lock:
                    item = next(pending, None)
                if item is None:
                    return
                position, text = item
                try:
                    outcomes[position] = (True, run(text))
                except Exception as e:  # re-raised in the caller, in input order
                    outcomes[position] = (False, e)
        finally:
            connections.close_all()  # this thread's connections only

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="retrieval-batch") as pool:
        for future in [pool.submit(worker) for _ in range(workers)]:
            future.result()
    for succeeded, value in outcomes:
        if not succeeded:
            raise value
    return [value for _, value in outcomes]
