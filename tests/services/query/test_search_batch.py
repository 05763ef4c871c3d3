"""Batch search: concurrent on worker threads with their own connections, answers in order."""

from __future__ import annotations

import pytest
from django.db import connections, transaction

from retrieval.exceptions import RetrievalError
from retrieval.models import QueryTrace
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search, search_batch
from retrieval.services.query.search_log import traced_as, untraced
from tests.support.retrievers import RendezvousRetriever

TEXTS = {"n": "North is up.", "e": "East is right.", "w": "West is left."}


@pytest.fixture
def atlas(keyword_settings, retrieval_settings):
    retrieval_settings(
        RETRIEVERS={
            "rendezvous": {"BACKEND": "tests.support.retrievers.RendezvousRetriever"},
            "broken": {"BACKEND": "tests.support.retrievers.BrokenRetriever"},
        }
    )
    RendezvousRetriever.meet()
    collection, _ = get_or_create_collection("atlas")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    return collection


def documents(results) -> list[str]:
    return [r.chunk.document.external_id for r in results]


@pytest.mark.django_db(transaction=True)
def test_queries_run_at_once_on_their_own_connections_and_answer_in_order(atlas):
    batches = search_batch(
        ["west", "north"], collection="atlas", retriever="rendezvous", top_k=1, scope=Scope.ALL
    )  # each search waits for the other at a barrier: sequential runs would fail
    assert [documents(b) for b in batches] == [["w"], ["n"]]
    threads = {name for _, name, _ in RendezvousRetriever.seen}
    assert len(threads) == 2 and all(n.startswith("retrieval-batch") for n in threads)
    worker_connections = [c for _, _, c in RendezvousRetriever.seen]
    assert all(c is not connections["default"] for c in worker_connections)
    assert all(c.connection is None for c in worker_connections)  # closed by the workers


@pytest.mark.django_db(transaction=True)
def test_the_same_answers_as_one_search_at_a_time(atlas):
    queries = ["north", "east west", "up", "left", "right north"]
    batches = search_batch(
        queries, collection=atlas, retriever="hybrid", top_k=2, max_workers=3, scope=Scope.ALL
    )
    for query, results in zip(queries, batches, strict=True):
        single = search(query, collection=atlas, retriever="hybrid", top_k=2, scope=Scope.ALL)
        assert [(r.chunk_id, r.score) for r in results] == [(r.chunk_id, r.score) for r in single]
    filtered = search_batch(
        ["north", "east"], collection=atlas, filters={"documents": ["w"]}, scope=Scope.ALL
    )
    assert [documents(b) for b in filtered] == [["w"], ["w"]]
    assert search_batch([], collection=atlas, scope=Scope.ALL) == []


@pytest.mark.django_db(transaction=True)
def test_worker_threads_trace_searches_as_their_caller_does(atlas, retrieval_settings):
    """A new thread starts with the context variables' defaults: the caller's source (the
    API's) and ``untraced`` must be carried over, or the traces would read ``python``."""
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    with traced_as("api"):
        search_batch(["north", "east"], collection=atlas, max_workers=2, scope=Scope.ALL)
    assert sorted(QueryTrace.objects.values_list("query", "source")) == [
        ("east", "api"),
        ("north", "api"),
    ]
    with untraced():
        search_batch(["west", "up"], collection=atlas, max_workers=2, scope=Scope.ALL)
    assert QueryTrace.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_failing_query_raises_its_error(atlas):
    with pytest.raises(RetrievalError, match="backend is down"):
        search_batch(["a", "b", "c"], collection=atlas, retriever="broken", scope=Scope.ALL)
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        search_batch(["a", "b"], collection=atlas, top_k=0, scope=Scope.ALL)
    with pytest.raises(ValueError, match="queries must be strings"):
        search_batch(["a", 1], collection=atlas, scope=Scope.ALL)


@pytest.mark.django_db
def test_inside_a_transaction_queries_see_its_uncommitted_writes(atlas):
    with transaction.atomic():
        ingest(atlas, [Source.from_text("Far up is north.", external_id="u")])
        batches = search_batch(
            ["far", "north"], collection=atlas, retriever="bm25", top_k=5, scope=Scope.ALL
        )
    assert [sorted(documents(b)) for b in batches] == [["u"], ["n", "u"]]
