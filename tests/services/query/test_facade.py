"""The facade: retrieval.search / search_batch / asearch / asearch_batch."""

from __future__ import annotations

import pytest

import retrieval
from retrieval.exceptions import InvalidComponentError, RetrievalError
from retrieval.services.access import Scope
from tests.conftest import collection_of, run_async

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection(keyword_settings):
    return collection_of(
        "atlas",
        {
            "north": "North is up. The pole is cold.",
            "east": "East is right. The sun rises there.",
            "south": "South is down.",
        },
    )


def test_the_default_pipeline_is_swapped_by_settings_alone(collection, retrieval_settings):
    before = retrieval.search("north pole", collection="atlas", top_k=3, scope=Scope.ALL)
    assert before.trace["events"][-1]["retrievers"] == ["hybrid"]
    retrieval_settings(
        PIPELINES={"keywords": {"retrievers": ["bm25"]}}, DEFAULT_PIPELINE="keywords"
    )
    after = retrieval.search("north pole", collection="atlas", top_k=3, scope=Scope.ALL)
    assert after.trace["events"][-1]["pipeline"] == "keywords"
    assert [r.chunk.document.external_id for r in after] == ["north"]  # BM25 only: one match


def test_a_collection_picks_its_own_default_pipeline(collection, retrieval_settings):
    retrieval_settings(PIPELINES={"keywords": {"retrievers": ["bm25"]}})
    collection.default_pipeline = "keywords"
    collection.save()
    results = retrieval.search("north pole", collection="atlas", scope=Scope.ALL)
    assert results.trace["events"][-1]["pipeline"] == "keywords"
    explicit = retrieval.search(
        "north pole", collection="atlas", pipeline="default", scope=Scope.ALL
    )
    assert explicit.trace["events"][-1]["pipeline"] == "default"


def test_max_tokens_packs_a_cited_context(collection):
    results = retrieval.search(
        "north pole", collection=collection, top_k=3, max_tokens=40, scope=Scope.ALL
    )
    context = results.context
    assert context.token_count <= 40 and context.text.startswith("[1]")
    first = context.citations[0]
    assert first.external_id == "north" and first.number == 1
    assert "North is up." in context.text and first.chunk_ids[0] == results[0].chunk_id


def test_clear_errors_name_the_choices(collection):
    with pytest.raises(InvalidComponentError, match="Unknown pipeline 'x'; configured: default"):
        retrieval.search("q", collection=collection, pipeline="x", scope=Scope.ALL)
    with pytest.raises(
        InvalidComponentError, match="configured: agentic, bm25, dense, graph, hybrid"
    ):
        retrieval.search("q", collection=collection, retriever="psychic", scope=Scope.ALL)
    with pytest.raises(ValueError, match="not both"):
        retrieval.search(
            "q", collection=collection, pipeline="default", retriever="bm25", scope=Scope.ALL
        )
    with pytest.raises(RetrievalError, match="not in RETRIEVAL\\['RERANKERS'\\]"):
        retrieval.search("q", collection=collection, reranker="ghost", scope=Scope.ALL)


@pytest.mark.django_db(transaction=True)  # worker threads see only committed data
def test_batch_and_async_answer_in_input_order(collection):
    queries = ["south", "east sun", "north pole"]
    batch = retrieval.search_batch(
        queries, collection="atlas", retriever="bm25", top_k=1, scope=Scope.ALL
    )
    assert [r[0].chunk.document.external_id for r in batch] == ["south", "east", "north"]
    assert all(r.trace["events"] for r in batch)
    one = run_async(
        retrieval.asearch("east sun", collection="atlas", retriever="bm25", scope=Scope.ALL)
    )
    assert one[0].chunk.document.external_id == "east"
    many = run_async(
        retrieval.asearch_batch(
            queries, collection="atlas", retriever="bm25", top_k=1, scope=Scope.ALL
        )
    )
    assert [r[0].chunk_id for r in many] == [r[0].chunk_id for r in batch]
