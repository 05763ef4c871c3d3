"""Hidden results (editors' removals): documents left out of the results of a query pattern.

:func:`with_editors_rules` runs a search's pipeline and then the editors' rules of its
collection, on every face that applies promotions: the promotions first
(:mod:`~retrieval.services.query.promotions`), then the hidden results, so a document
both promoted and hidden for a query is hidden. A rule matches a query as a promotion
does (``*`` for any text, case and spacing ignored); every chunk of its document leaves
the results, and the pipeline is asked for as many more results as rules matched, so
the reader still gets ``top_k`` when the collection has them.

The trace records a ``hidden`` event naming the results removed, which the search had
found within the reader's scope: a rule whose document the reader cannot see removes
nothing from her results and is never named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from retrieval.models import Collection, HiddenResult
from retrieval.normalizing import matches
from retrieval.services.core.databases import search_database
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import current_trace
from retrieval.services.query.promotions import promote
from retrieval.services.types import RetrievalResult

__all__ = ["editors_rules", "hidden_documents", "hide", "with_editors_rules"]


def hidden_documents(query: str, collection: Collection) -> dict[int, int]:
    """Return the documents the active rules of ``collection`` hide for ``query``:
    document id -> the first such rule's id."""
    text = query.replace("\x00", "")  # PostgreSQL text holds no NUL; no pattern has one
    rows = (
        HiddenResult.objects.using(search_database())
        .filter(matches(text), collection=collection, active=True)
        .order_by("pk")
        .values_list("document_id", "pk")
    )
    hidden: dict[int, int] = {}
    for document_id, rule_id in rows:
        hidden.setdefault(document_id, rule_id)
    return hidden


def hide(
    results: Sequence[RetrievalResult], hidden: dict[int, int], *, top_k: int
) -> list[RetrievalResult]:
    """Return ``results`` without the chunks of the ``hidden`` documents, at most ``top_k``,
    ranked again from 0; record what was removed in the trace."""
    kept = [result for result in results if result.chunk.document_id not in hidden]
    removed = [result for result in results if result.chunk.document_id in hidden]
    if removed:
        trace = current_trace()
        if trace is not None:
            events = [
                {
                    "hidden_id": hidden[result.chunk.document_id],
                    "document_id": result.chunk.document_id,
                    "chunk_id": result.chunk.pk,
                    "retrieved_rank": result.rank + 1,
                }
                for result in removed
            ]
            trace.record("hidden", results=events)
    if not removed and len(kept) <= top_k:
        return kept
    return [replace(result, rank=rank) for rank, result in enumerate(kept[:top_k])]


def with_editors_rules(
    query: str,
    run: Callable[[int], Sequence[RetrievalResult]],
    *,
    collection: Collection,
    filters: Filters,
    top_k: int,
) -> list[RetrievalResult]:
    """Return ``run(k)``'s results (a search's pipeline asked for ``k``) with the
    promotions and hidden results of ``query`` applied, at most ``top_k``."""
    hidden = hidden_documents(query, collection)
    results = run(top_k + len(hidden))
    return editors_rules(
        query, results, hidden, collection=collection, filters=filters, top_k=top_k
    )


def editors_rules(
    query: str,
    results: Sequence[RetrievalResult],
    hidden: dict[int, int],
    *,
    collection: Collection,
    filters: Filters,
    top_k: int,
) -> list[RetrievalResult]:
    """Return ``results`` (a pipeline's, ``len(hidden)`` more than ``top_k`` if it had as
    many) with the promotions of ``query`` and its ``hidden`` documents applied."""
    fetched = top_k + len(hidden)
    promoted = promote(query, results, collection=collection, filters=filters, top_k=fetched)
    return hide(promoted, hidden, top_k=top_k)
