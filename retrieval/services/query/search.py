"""The search facade: a query (or a batch) through a named pipeline or retriever.

``search`` runs one query and returns its results with the query's trace and, given
``max_tokens``, a packed context for an LLM prompt; ``search_batch`` runs many
concurrently; ``asearch`` and ``asearch_batch`` are their async counterparts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection, connections

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.access import Scope, resolve_scope
from retrieval.services.core.databases import primary_if_unreachable
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import traced
from retrieval.services.query.hiding import editors_rules, hidden_documents, with_editors_rules
from retrieval.services.query.packing import pack_context
from retrieval.services.query.pipelines import Pipeline
from retrieval.services.query.search_log import carrying_source, record_search
from retrieval.services.registry import retrievers
from retrieval.services.rewriters.base import Turn
from retrieval.services.types import SearchResults

T = TypeVar("T")


def pipeline_for(
    collection: Collection,
    *,
    pipeline: str | None = None,
    retriever: str | None = None,
    rewriter: str | None = None,
    reranker: str | None = None,
) -> Pipeline:
    """Return the pipeline a search runs: a retriever alone if one is named, else the named
    pipeline, else the collection's, else ``DEFAULT_PIPELINE``; ``rewriter``/``reranker``
    replace its steps."""
    if pipeline and retriever:
        raise ValueError("Name a pipeline or a retriever, not both.")
    if retriever:
        retrievers[retriever]  # an unknown alias fails here, naming the configured ones
        chosen = Pipeline(name=f"retriever:{retriever}", retrievers={retriever: 1.0})
    else:
        chosen = Pipeline.configured(
            pipeline or collection.default_pipeline or retrieval_settings.DEFAULT_PIPELINE
        )
    if rewriter is not None:
        chosen.rewriter = rewriter
    if reranker is not None:
        chosen.reranker = reranker
    errors = chosen.check()
    if errors:
        raise RetrievalError(f"{errors[0].msg} {errors[0].hint}")
    return chosen


def search(
    query: str,
    *,
    collection: Collection | str,
    user: Any = None,
    scope: Scope | None = None,
    pipeline: str | None = None,
    retriever: str | None = None,
    top_k: int = 10,
    filters: Filters | Mapping[str, Any] | None = None,
    history: Sequence[Turn] | None = None,
    max_tokens: int | None = None,
    rewriter: str | None = None,
    reranker: str | None = None,
) -> SearchResults:
    """Return the ``top_k`` best chunks of ``collection`` for ``query``.

    :param user: the requesting user (``AnonymousUser`` for nobody signed in); or
    :param scope: a :class:`Scope`, e.g. ``Scope.ALL`` for commands and tasks. One of
        the two is required: only what it may see is searched, on every leg, and a
        hidden collection raises :class:`CollectionNotFound` like a missing one.
    :param pipeline: a ``PIPELINES`` alias (default ``DEFAULT_PIPELINE``); or
    :param retriever: a ``RETRIEVERS`` alias to run alone.
    :param filters: :class:`Filters` or their mapping form.
    :param history: earlier conversation turns, for rewriters that fold them in.
    :param max_tokens: also pack the best results into a context of at most this many
        tokens (``results.context``), with citations.
    :param rewriter: a ``REWRITERS`` alias replacing the pipeline's rewrite step.
    :param reranker: a ``RERANKERS`` alias replacing the pipeline's rerank step.

    The results carry the query's trace (``results.trace``). Documents promoted for the
    query (:mod:`~retrieval.services.query.promotions`) come first, within the scope and
    the filters, marked ``metadata["promoted"]``; documents hidden for it
    (:mod:`~retrieval.services.query.hiding`) are left out.
    """
    allowed = resolve_scope(scope, user, caller="search")
    target = allowed.collection(collection)
    scoped = allowed.filters(filters)
    chosen = pipeline_for(
        target, pipeline=pipeline, retriever=retriever, rewriter=rewriter, reranker=reranker
    )
    with traced() as trace, primary_if_unreachable() as fallback:
        if fallback:
            trace.record("read_primary", reason=fallback)
        results = with_editors_rules(
            query,
            lambda k: chosen.run(
                query, collection=target, top_k=k, filters=scoped, history=history
            ),
            collection=target,
            filters=scoped,
            top_k=top_k,
        )
    return _answer(
        query, results, trace, target, chosen.name, top_k, filters, max_tokens, allowed.user
    )


def search_batch(
    queries: Sequence[str],
    *,
    collection: Collection | str,
    user: Any = None,
    scope: Scope | None = None,
    max_workers: int | None = None,
    **options: Any,
) -> list[SearchResults]:
    """Run :func:`search` for each of ``queries`` (same options), answers in input order.

    ``user`` or ``scope`` is required, as for :func:`search`; it is resolved once.
    :param max_workers: threads running queries at once (default ``BATCH_SEARCH_WORKERS``).

    A batch whose pipeline is one dense leg alone (no rewriter, no reranker) on an index
    that takes many query vectors in one request (``IndexFeatures.batch_queries``:
    Milvus, Chroma) is answered at once: one embedding call and one engine request for
    every query; each answer's trace is the batch's. Otherwise, outside a transaction
    the queries run concurrently on worker threads, each with its own database
    connection, closed when the thread has no query left. Inside a transaction
    (``atomic``, ``ATOMIC_REQUESTS``) they run one after another on the caller's
    connection instead, so they see the transaction's uncommitted writes. The first
    query that fails (in input order) raises its error.
    """
    texts = list(queries)
    if not all(isinstance(text, str) for text in texts):
        raise ValueError("queries must be strings.")
    allowed = resolve_scope(scope, user, caller="search_batch")
    target = allowed.collection(collection)
    if texts:
        steps = {key: options.get(key) for key in STEPS}
        chosen = pipeline_for(target, **steps)
        if chosen.batched_retriever(target) is not None:
            return _search_at_once(texts, target, allowed, chosen, **options)
    workers = min(max_workers or int(retrieval_settings.BATCH_SEARCH_WORKERS), len(texts))

    def run(text: str) -> SearchResults:
        return search(text, collection=target, scope=allowed, **options)

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
        for future in [pool.submit(carrying_source(worker)) for _ in range(workers)]:
            future.result()
    for succeeded, value in outcomes:
        if not succeeded:
            raise value
    return [value for _, value in outcomes]


#: The options of :func:`search` that choose its pipeline.
STEPS = ("pipeline", "retriever", "rewriter", "reranker")


def _search_at_once(
    texts: list[str],
    target: Collection,
    allowed: Scope,
    chosen: Pipeline,
    *,
    top_k: int = 10,
    filters: Filters | Mapping[str, Any] | None = None,
    max_tokens: int | None = None,
    history: Sequence[Turn] | None = None,  # for rewriters: this pipeline has none
    **steps: Any,
) -> list[SearchResults]:
    """Answer a batch through :meth:`Pipeline.run_many` (one embedding call, one engine
    request), with the editors' rules and recorded as :func:`search` applies and records
    them for each query."""
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        raise TypeError(f"search() got unexpected keyword arguments: {', '.join(unknown)}")
    scoped = allowed.filters(filters)
    with traced() as trace, primary_if_unreachable() as fallback:
        if fallback:
            trace.record("read_primary", reason=fallback)
        hidden = [hidden_documents(text, target) for text in texts]
        fetched = top_k + max(len(documents) for documents in hidden)
        lists = [
            editors_rules(text, results, documents, collection=target, filters=scoped, top_k=top_k)
            for text, results, documents in zip(
                texts,
                chosen.run_many(texts, collection=target, top_k=fetched, filters=scoped),
                hidden,
                strict=True,
            )
        ]
    return [
        _answer(text, results, trace, target, chosen.name, top_k, filters, max_tokens, allowed.user)
        for text, results in zip(texts, lists, strict=True)
    ]


def _answer(
    query: str,
    results: list,
    trace: Any,
    collection: Collection,
    pipeline: str,
    top_k: int,
    filters: Any,
    max_tokens: int | None,
    user: Any,
) -> SearchResults:
    """Return a search's answer (its context packed if asked) and record its trace."""
    context = None if max_tokens is None else pack_context(results, max_tokens=max_tokens)
    answer = SearchResults(results, trace=trace.to_dict(), context=context)
    kept = record_search(
        query,
        collection=collection,
        pipeline=pipeline,
        top_k=top_k,
        filters=filters,
        results=answer,
        trace=answer.trace,
        user=user,
    )
    answer.trace_id = None if kept is None else kept.pk
    return answer


def _closing_connections(function: Callable[..., T]) -> Callable[..., T]:
    """Run ``function`` and close the database connections its thread opened."""

    def run(*args: Any, **kwargs: Any) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            connections.close_all()  # this worker thread's connections only

    return run


async def asearch(query: str, **options: Any) -> SearchResults:
    """:func:`search` for async views and agents, on a worker thread (its own connection)."""
    return await sync_to_async(_closing_connections(search), thread_sensitive=False)(
        query, **options
    )


async def asearch_batch(queries: Sequence[str], **options: Any) -> list[SearchResults]:
    """:func:`search_batch` for async views and agents; gather several :func:`asearch`
    calls instead to interleave them with other awaits."""
    return await sync_to_async(_closing_connections(search_batch), thread_sensitive=False)(
        queries, **options
    )
