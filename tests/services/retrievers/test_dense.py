"""Dense retrieval on real PostgreSQL + pgvector, with answers worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db import connection

from retrieval.exceptions import DimensionMismatchError, InvalidFilterError
from retrieval.models import Chunk, Collection, Document
from retrieval.services.access import Scope
from retrieval.services.indexes.base import vector_literal
from retrieval.services.indexes.pgvector import vector_index_name
from retrieval.services.ingestion.collections import ensure_vector_index, get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from retrieval.services.retrievers.dense import PgvectorRetriever

pytestmark = pytest.mark.django_db


@pytest.fixture
def compass(keyword_settings):
    """Four one-paragraph documents on the axes (north, east, up)."""
    collection, _ = get_or_create_collection("compass")
    texts = {
        "n": "north",
        "ne": "north east",
        "e": "east",
        "u": "up",
    }
    sources = [
        Source.from_text(
            text,
            external_id=key,
            metadata={"axis": key, "group": "flat" if key != "u" else "vertical"},
        )
        for key, text in texts.items()
    ]
    run = ingest(collection, sources)
    assert run.status == "succeeded", run.errors
    return collection


def test_scores_are_cosine_similarities(compass):
    results = search("north", collection=compass, retriever="dense", top_k=4, scope=Scope.ALL)
    ranked = [(r.chunk.document.external_id, round(r.score, 4)) for r in results]
    # cos(north, north) = 1; cos(north, (north+east)/√2) = 1/√2; east and up are orthogonal.
    assert ranked[:2] == [("n", 1.0), ("ne", round(1 / math.sqrt(2), 4))]
    assert {doc for doc, _ in ranked[2:]} == {"e", "u"}
    assert all(score == 0.0 for _, score in ranked[2:])
    assert [r.rank for r in results] == [0, 1, 2, 3]


def test_top_k_limits_results(compass):
    assert len(search("north east", collection=compass, top_k=2, scope=Scope.ALL)) == 2


def test_document_and_metadata_filters(compass):
    by_external_id = search(
        "north", collection=compass, top_k=4, filters={"documents": ["e", "u"]}, scope=Scope.ALL
    )
    assert {r.chunk.document.external_id for r in by_external_id} == {"e", "u"}

    up_id = Document.objects.get(collection=compass, external_id="u").pk
    by_pk = search(
        "north", collection=compass, top_k=4, filters={"document_ids": [up_id]}, scope=Scope.ALL
    )
    assert [r.chunk.document.external_id for r in by_pk] == ["u"]

    flat = search(
        "up", collection=compass, top_k=4, filters={"metadata": {"group": "flat"}}, scope=Scope.ALL
    )
    assert {r.chunk.document.external_id for r in flat} == {"n", "ne", "e"}


def test_score_threshold_drops_weak_matches(compass):
    retriever = PgvectorRetriever(score_threshold=0.5)
    results = retriever.retrieve("north", collection=compass, top_k=4)
    assert [r.chunk.document.external_id for r in results] == ["n", "ne"]


@pytest.mark.parametrize(
    "filters",
    [
        {"unknown": 1},
        {"document_ids": ["a"]},
        {"documents": [1]},
        {"metadata": [1]},
        ["not", "a", "dict"],
    ],
)
def test_bad_filters_are_refused(compass, filters):
    with pytest.raises(InvalidFilterError):
        search("north", collection=compass, filters=filters, scope=Scope.ALL)


def test_bad_top_k_is_refused(compass):
    with pytest.raises(ValueError, match="top_k"):
        search("north", collection=compass, top_k=0, scope=Scope.ALL)


def test_query_vector_of_wrong_dimension_is_refused(compass):
    with pytest.raises(DimensionMismatchError):
        PgvectorRetriever().search_vector([1.0, 0.0], collection=compass, top_k=3)


def _new_collection(name: str, dimensions: int) -> Collection:
    collection = Collection.objects.create(
        name=name, slug=name, embedder="default", dimensions=dimensions
    )
    ensure_vector_index(collection)  # before any chunk write in this transaction
    return collection


def _fill(collection: Collection, rows: int, *, rare_every: int = 0, seed: int = 0) -> np.ndarray:
    """Store ``rows`` random unit vectors directly; every ``rare_every``-th is tagged rare."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, collection.dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    name = collection.name
    document = Document.objects.create(
        collection=collection, external_id=f"{name}-doc", content="x" * rows
    )
    Chunk.objects.bulk_create(
        [
            Chunk(
                collection=collection,
                document=document,
                index=i,
                content="x",
                start=i,
                end=i + 1,
                embedding=vector,
                metadata={"tag": "rare"} if rare_every and i % rare_every == 0 else {},
            )
            for i, vector in enumerate(vectors)
        ],
        batch_size=1000,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_chunk")
    return vectors


def test_collections_of_different_dimensions_each_use_their_hnsw_index():
    small, large = _new_collection("dims3", 3), _new_collection("dims8", 8)
    small_vectors, large_vectors = _fill(small, 1500, seed=1), _fill(large, 1500, seed=2)
    retriever = PgvectorRetriever()
    # At 1,500 rows a sort of every chunk is costed cheaper than the index on a fresh
    # database (rightly: it is exact and fast): rule it out, so the plan shows whether the
    # query can use this collection's own index at all.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
    for collection, vectors in ((small, small_vectors), (large, large_vectors)):
        plan = retriever.explain(vectors[0], collection=collection, top_k=10)
        assert vector_index_name(collection.pk) in plan, plan
        results = retriever.search_vector(vectors[0], collection=collection, top_k=10)
        assert results[0].chunk.index == 0
        assert results[0].score == pytest.approx(1.0, abs=1e-5)
        exact = np.argsort(-(vectors @ vectors[0]))[:10]
        found = {r.chunk.index for r in results}
        assert len(found & set(exact.tolist())) >= 9  # approximate index, near-exact recall


def test_a_chunk_keeps_its_vector_in_its_row_when_the_row_is_too_long():
    # A 384-dimensional vector (1.5 KB) beside 1,500 characters: past the ~2 KB a row
    # holds before PostgreSQL moves values out of line. Ranking reads the vector of every
    # row it returns, the load the text of the final few: the text goes.
    collection = _new_collection("long-rows", 384)
    rng = np.random.default_rng(7)
    text = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz "), 1500))
    document = Document.objects.create(collection=collection, external_id="long", content=text)
    chunk = Chunk.objects.create(
        collection=collection,
        document=document,
        index=0,
        content=text,
        start=0,
        end=len(text),
        embedding=rng.normal(size=384).astype(np.float32),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_toast_chunk_id(embedding), pg_column_toast_chunk_id(content), "
            "pg_column_size(content) FROM retrieval_chunk WHERE id = %s",
            [chunk.pk],
        )
        vector_out_of_line, text_out_of_line, text_size = cursor.fetchone()
    assert vector_out_of_line is None
    assert text_out_of_line is not None or text_size < 1500  # out of line, or compressed


def test_an_index_built_without_the_dimension_condition_is_still_used():
    # Indexes built before the space condition held ``vector_dims`` (upgraded sites).
    collection = _new_collection("older-index", 8)
    vectors = _fill(collection, 1500, seed=5)
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # CREATE INDEX refuses pending checks
        cursor.execute(f"DROP INDEX {vector_index_name(collection.pk)}")
        cursor.execute(
            f"CREATE INDEX {vector_index_name(collection.pk)} ON retrieval_chunk "
            "USING hnsw ((embedding::vector(8)) vector_cosine_ops) "
            f"WHERE collection_id = {collection.pk}"
        )
        cursor.execute("SET LOCAL enable_sort = off")  # as in the test above
    retriever = PgvectorRetriever()
    plan = retriever.explain(vectors[3], collection=collection, top_k=10)
    assert vector_index_name(collection.pk) in plan, plan
    results = retriever.search_vector(vectors[3], collection=collection, top_k=10)
    assert results[0].chunk.index == 3


def test_small_filter_is_ranked_by_an_exact_scan():
    collection = _new_collection("sparse-tags", 8)
    vectors = _fill(collection, 3000, rare_every=150, seed=3)  # 20 rare chunks
    query, rare_filter = vectors[1], {"metadata": {"tag": "rare"}}
    retriever = PgvectorRetriever()  # exact_scan_limit 5000 > 20 matches
    results = retriever.search_vector(query, collection=collection, top_k=10, filters=rare_filter)
    rare = np.arange(0, 3000, 150)
    expected = rare[np.argsort(-(vectors[rare] @ query))[:10]]
    assert [r.chunk.index for r in results] == expected.tolist()
    plan = retriever.explain(query, collection=collection, top_k=10, filters=rare_filter)
    assert vector_index_name(collection.pk) not in plan, plan


def test_wide_filter_walks_the_index_iteratively_until_top_k_match():
    collection = _new_collection("tagged", 8)
    vectors = _fill(collection, 4000, rare_every=4, seed=4)  # 1000 tagged chunks, 25%
    query, tag_filter = vectors[7], {"metadata": {"tag": "rare"}}
    # The index path (a walk keeping 20 candidates visits about 80 vectors, fewer than the
    # 1000 allowed): without iterative scans, those candidates hold ~5 tagged ones.
    retriever = PgvectorRetriever(exact_scan_limit=0, ef_search=10)
    plan = retriever.explain(query, collection=collection, top_k=10, filters=tag_filter)
    assert vector_index_name(collection.pk) in plan, plan
    results = retriever.search_vector(query, collection=collection, top_k=10, filters=tag_filter)
    assert len(results) == 10
    assert all(r.chunk.metadata == {"tag": "rare"} for r in results)
    tagged = np.arange(0, 4000, 4)
    expected = set(tagged[np.argsort(-(vectors[tagged] @ query))[:10]].tolist())
    assert len(expected & {r.chunk.index for r in results}) >= 8
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_the_query_vector_reaches_postgresql_exactly():
    # Nine significant digits give every float32 back, tiny, huge and negative ones too.
    rng = np.random.default_rng(7)
    with connection.cursor() as cursor:
        for scale in (1e-30, 1e-8, 1e-3, 1.0, 1e3, 1e8, 1e30):
            vector = (rng.normal(size=384) * scale).astype(np.float32)
            cursor.execute("SELECT (%s::vector)::real[]", [vector_literal(vector)])
            parsed = np.array(cursor.fetchone()[0], dtype=np.float32)
            assert np.array_equal(parsed, vector)
    assert vector_literal([]) == "[]" and vector_literal([0.5, -2]) == "[0.5,-2]"


def test_scores_lie_in_0_1_with_the_raw_cosine_kept():
    """A dense result's score is its cosine similarity, a negative one counting 0."""
    from retrieval.services.retrievers.base import BaseRetriever
    from retrieval.services.types import ScoredChunk

    class Plain(BaseRetriever):
        def _rank(self, query, *, collection, top_k, filters):  # pragma: no cover
            return []

    ranking = [ScoredChunk(1, 0.8), ScoredChunk(2, 0.1), ScoredChunk(3, -0.3)]
    scored = Plain().normalise(ranking)
    assert [s.score for s in scored] == [0.8, 0.1, 0.0]
    assert [s.metadata["raw_score"] for s in scored] == [0.8, 0.1, -0.3]
    above = Plain().normalise([ScoredChunk(1, 4.0), ScoredChunk(2, 1.0)])
    assert [s.score for s in above] == [1.0, 0.25]
