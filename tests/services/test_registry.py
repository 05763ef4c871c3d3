"""The component registry: an instance of an alias a thread, dropped when RETRIEVAL changes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from retrieval.services.registry import retrievers
from tests.support.retrievers import LastQueryRetriever

BM25 = "retrieval.services.retrievers.bm25.BM25Retriever"


@pytest.mark.django_db(transaction=True)
def test_concurrent_searches_of_one_alias_keep_their_own_per_call_state(
    keyword_settings, retrieval_settings
):
    retrieval_settings(
        RETRIEVERS={"last-query": {"BACKEND": "tests.support.retrievers.LastQueryRetriever"}}
    )
    collection, _ = get_or_create_collection("compass")
    texts = {"n": "North is up.", "e": "East is right."}
    ingest(collection, [Source.from_text(text, external_id=key) for key, text in texts.items()])
    # Both searches keep their query on the retriever, then wait for each other: one
    # instance shared by the threads would hold the query kept last for both.
    LastQueryRetriever.barrier = threading.Barrier(2, timeout=10)
    found: dict[str, list[str]] = {}

    def run(query: str) -> None:
        try:
            results = search(
                query, collection=collection, retriever="last-query", top_k=1, scope=Scope.ALL
            )
            found[query] = [r.chunk.document.external_id for r in results]
        finally:
            connections.close_all()  # this thread's

    threads = [threading.Thread(target=run, args=(query,)) for query in ("north", "east")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == {"north": ["n"], "east": ["e"]}


def test_each_thread_has_its_instance_and_a_settings_change_drops_every_thread_s(
    retrieval_settings,
):
    retrieval_settings(RETRIEVERS={"words": {"BACKEND": BM25}})
    with ThreadPoolExecutor(max_workers=1) as pool:  # one thread, asked twice
        theirs = pool.submit(lambda: retrievers["words"]).result()
        assert pool.submit(lambda: retrievers["words"]).result() is theirs
        assert retrievers["words"] is not theirs and retrievers["words"] is retrievers["words"]
        retrieval_settings(RETRIEVERS={"words": {"BACKEND": BM25}})
        assert pool.submit(lambda: retrievers["words"]).result() is not theirs
