"""Dense search under filters: exact scan or iterative walk chosen by the filter's
estimated size, a wider candidate list as the filter narrows, and an exact scan when a
walk stops short."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.services.indexes.pgvector import vector_index_name
from retrieval.services.retrievers.dense import PgvectorRetriever

from .test_dense import _fill, _new_collection

pytestmark = pytest.mark.django_db


def counts(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if "count(*)" in q["sql"]]


def estimates(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"].startswith("EXPLAIN")]


def ef_search_set(captured) -> int:
    """The ``hnsw.ef_search`` the ranking query ran with."""
    for query in captured.captured_queries:
        if "set_config" in query["sql"] and "'hnsw.ef_search'" in query["sql"]:
            values = query["sql"].split("'hnsw.ef_search', '")[1]
            return int(values.split("'")[0])
    raise AssertionError("no ef_search set")


def exact_top(vectors: np.ndarray, rows: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return rows[np.argsort(-(vectors[rows] @ query))[:k]].tolist()


def exact_found(collection, vectors: np.ndarray, rows: np.ndarray, query: np.ndarray, found) -> int:
    """How many of the exact top 10 among ``rows`` a ranking ``found``."""
    ids = dict(collection.chunks.values_list("index", "pk"))
    expected = {ids[i] for i in exact_top(vectors, rows, query, 10)}
    return len(expected & {f.chunk_id for f in found})


def test_a_filter_estimated_far_below_the_limit_is_scanned_exactly_without_counting():
    collection = _new_collection("few-tagged", 8)
    vectors = _fill(collection, 3000, rare_every=150, seed=11)  # 20 tagged
    retriever = PgvectorRetriever(exact_scan_limit=1000)
    with CaptureQueriesContext(connection) as captured:
        found = retriever.rank_vector(
            vectors[5], collection=collection, top_k=10, filters={"metadata": {"tag": "rare"}}
        )
    assert counts(captured) == []
    plan = retriever.explain(
        vectors[5], collection=collection, top_k=10, filters={"metadata": {"tag": "rare"}}
    )
    assert vector_index_name(collection.pk) not in plan, plan
    ids = dict(collection.chunks.values_list("index", "pk"))
    expected = exact_top(vectors, np.arange(0, 3000, 150), vectors[5], 10)
    assert [f.chunk_id for f in found] == [ids[i] for i in expected]


def test_a_filter_estimated_far_above_the_limit_walks_the_index_with_a_wider_list():
    collection = _new_collection("half-tagged", 8)
    vectors = _fill(collection, 4000, rare_every=10, seed=12)  # 400 tagged, 10%
    retriever = PgvectorRetriever(exact_scan_limit=100, ef_search=10)
    options = {"collection": collection, "top_k": 10, "filters": {"metadata": {"tag": "rare"}}}
    with CaptureQueriesContext(connection) as captured:
        found = retriever.rank_vector(vectors[7], **options)
    assert counts(captured) == []
    assert len(estimates(captured)) == 1  # the filter's rows and the collection's, one plan
    # ef_search / √share: about 10 / √0.1 ≈ 32 (the share is estimated), at most 4 × 10;
    # such a walk visits about 32 / 0.1 = 320 vectors, fewer than the 400 allowed.
    assert 20 <= ef_search_set(captured) <= 40
    assert vector_index_name(collection.pk) in retriever.explain(vectors[7], **options)
    assert len(found) == 10
    assert exact_found(collection, vectors, np.arange(0, 4000, 10), vectors[7], found) >= 9


def test_a_filter_estimated_near_the_limit_is_counted():
    collection = _new_collection("some-tagged", 8)
    vectors = _fill(collection, 3000, rare_every=10, seed=13)  # 300 tagged
    with CaptureQueriesContext(connection) as captured:
        PgvectorRetriever(exact_scan_limit=300).rank_vector(
            vectors[1], collection=collection, top_k=10, filters={"metadata": {"tag": "rare"}}
        )
    assert len(counts(captured)) == 1


def test_a_walk_that_stops_short_is_redone_exactly():
    """Statistics from before most tags were removed: the estimate says 10%, two chunks
    remain tagged; the walk gives up at max_scan_tuples, the exact scan finds both."""
    collection = _new_collection("stale-tags", 8)
    vectors = _fill(collection, 4000, rare_every=10, seed=14)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_chunk SET metadata = '{}' WHERE collection_id = %s "
            "AND index NOT IN (1230, 3870)",
            [collection.pk],
        )
    retriever = PgvectorRetriever(exact_scan_limit=100, max_scan_tuples=50, ef_search=10)
    found = retriever.rank_vector(
        vectors[0], collection=collection, top_k=10, filters={"metadata": {"tag": "rare"}}
    )
    ids = dict(collection.chunks.values_list("index", "pk"))
    assert {f.chunk_id for f in found} == {ids[1230], ids[3870]}


def test_a_filter_estimated_just_above_the_limit_is_walked_without_counting():
    """Counting costs as many rows as the filter allows; the walk's list is widened by
    the estimated share."""
    collection = _new_collection("fifth-tagged", 8)
    vectors = _fill(collection, 3000, rare_every=5, seed=15)  # 600 tagged
    with CaptureQueriesContext(connection) as captured:
        found = PgvectorRetriever(exact_scan_limit=500, ef_search=10).rank_vector(
            vectors[2], collection=collection, top_k=10, filters={"metadata": {"tag": "rare"}}
        )
    assert counts(captured) == []
    assert 18 <= ef_search_set(captured) <= 30  # 10 / √0.2 ≈ 23
    assert len(found) == 10


def test_a_narrow_filter_above_the_limit_is_scanned_exactly_when_a_walk_would_visit_more():
    """A 1% scope: a walk keeping 160 of its vectors (4 × 40) would visit about 16,000 to
    find them, more than the 40 the scope holds; an exact scan reads those."""
    collection = _new_collection("hundredth-tagged", 8)
    vectors = _fill(collection, 4000, rare_every=100, seed=16)  # 40 tagged
    retriever = PgvectorRetriever(exact_scan_limit=10, ef_search=40)
    options = {"collection": collection, "top_k": 10, "filters": {"metadata": {"tag": "rare"}}}
    found = retriever.rank_vector(vectors[3], **options)
    assert vector_index_name(collection.pk) not in retriever.explain(vectors[3], **options)
    ids = dict(collection.chunks.values_list("index", "pk"))
    expected = exact_top(vectors, np.arange(0, 4000, 100), vectors[3], 10)
    assert [f.chunk_id for f in found] == [ids[i] for i in expected]


def test_a_wide_list_is_never_past_pgvectors_range():
    """``ef_search / √share`` of a large ``ef_search`` passed pgvector's ``hnsw.ef_search``
    range (1,000): the search failed with a DataError (``--ef-search 400`` at a 10% scope
    of 1M chunks). The walk's list stops at the range; the walk goes on past it."""
    collection = _new_collection("wide-list", 8)
    vectors = _fill(collection, 6000, rare_every=2, seed=15)  # 3,000 tagged, 50%
    retriever = PgvectorRetriever(exact_scan_limit=100, ef_search=1000)
    options = {"collection": collection, "top_k": 10, "filters": {"metadata": {"tag": "rare"}}}
    with CaptureQueriesContext(connection) as captured:
        found = retriever.rank_vector(vectors[3], **options)
    assert ef_search_set(captured) == 1000
    assert exact_found(collection, vectors, np.arange(0, 6000, 2), vectors[3], found) >= 9


def test_more_results_than_one_hnsw_list_holds():
    """A top_k past pgvector's ``hnsw.ef_search`` range is walked on, not refused."""
    collection = _new_collection("many", 8)
    vectors = _fill(collection, 1500, seed=16)
    found = PgvectorRetriever().rank_vector(vectors[0], collection=collection, top_k=1200)
    ids = dict(collection.chunks.values_list("index", "pk"))
    expected = [ids[i] for i in np.argsort(-(vectors @ vectors[0]))[:1200]]
    assert len(found) == 1200
    assert len(set(expected) & {f.chunk_id for f in found}) >= 1150


@pytest.mark.parametrize("ef_search", [0, 1001])
def test_an_ef_search_outside_pgvectors_range_is_refused(ef_search):
    with pytest.raises(ValueError, match="between 1 and 1000"):
        PgvectorRetriever(ef_search=ef_search)


def test_a_readers_scope_is_estimated_within_its_collection_beside_a_public_one(
    django_user_model,
):
    """Every reader holds "public": estimated over the whole table, a scope of 50 chunks
    of a restricted collection counted the public collection's 5,000 in its share (840 of
    1,000 estimated) and was walked; estimated per collection it is scanned exactly."""
    from django.contrib.auth.models import Group

    from retrieval.models import Document
    from retrieval.services.access import Scope
    from tests.conftest import analyze_tables

    restricted = _new_collection("restricted-beside-public", 8)
    vectors = _fill(restricted, 1000, seed=17)
    _fill(_new_collection("public-beside-restricted", 8), 5000, seed=18)
    group = Group.objects.create(name="few")
    reader = django_user_model.objects.create_user(username="member")
    reader.groups.add(group)
    seen = Document.objects.create(collection=restricted, external_id="seen", content="x" * 50)
    restricted.chunks.filter(index__lt=50).update(document=seen)
    Document.objects.filter(collection=restricted, external_id__endswith="-doc").update(access=[])
    seen.access = [f"group:{group.pk}"]
    seen.save()
    analyze_tables()
    retriever = PgvectorRetriever(exact_scan_limit=200, ef_search=10)
    options = {"collection": restricted, "top_k": 10, "filters": Scope.for_user(reader).filters()}
    assert sorted(Scope.for_user(reader).filters().chunk_ids(restricted.pk)) == sorted(
        restricted.chunks.filter(index__lt=50).values_list("pk", flat=True)
    )
    found = retriever.rank_vector(vectors[60], **options)
    assert vector_index_name(restricted.pk) not in retriever.explain(vectors[60], **options)
    assert exact_found(restricted, vectors, np.arange(50), vectors[60], found) == 10
