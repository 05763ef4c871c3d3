"""Hybrid retrieval: fused legs, per-leg explanations, failing legs, concurrent legs."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from retrieval.exceptions import DimensionMismatchError, RetrievalError
from retrieval.models import Chunk
from retrieval.services.access import Scope
from retrieval.services.core.filters import Filters
from retrieval.services.core.fusion import relative_score_fuse
from retrieval.services.core.legs import Leg, _spare_connection, run_legs
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from retrieval.services.registry import retrievers
from retrieval.services.retrievers.dense import DenseRetriever
from retrieval.services.retrievers.hybrid import HybridRetriever
from tests.conftest import collection_of
from tests.support.retrievers import FailingScorerRetriever, RankOnlyRetriever

TEXTS = {
    "a": "North winds blow over the pole.",
    "b": "East of the river the road goes up.",
    "c": "The compass needle points north and never east.",
    "d": "Up the mountain, north face, a climb.",
}
BROKEN = {"BACKEND": "tests.support.retrievers.BrokenRetriever"}


def fused_legs(query: str, collection) -> list:
    """The default fusion of BM25's and dense's 100 candidates, top 4: what the hybrid returns."""
    legs = [
        retrievers[alias].rank(query, collection=collection, top_k=100)
        for alias in ("bm25", "dense")
    ]
    return relative_score_fuse(legs, top_k=4)


@pytest.fixture
def compass(keyword_settings, retrieval_settings):
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    collection, _ = get_or_create_collection("compass")
    ingest(collection, [Source.from_text(text, external_id=key) for key, text in TEXTS.items()])
    return collection


@pytest.mark.django_db
def test_default_hybrid_is_relative_score_fusion_of_bm25_and_dense(compass):
    query = "north needle"
    fused = search(
        query, collection=compass, top_k=4, scope=Scope.ALL
    )  # the default retriever is "hybrid"
    bm25 = retrievers["bm25"].rank(query, collection=compass, top_k=100)
    dense = retrievers["dense"].rank(query, collection=compass, top_k=100)
    expected = relative_score_fuse([bm25, dense], [1.0, 1.0], top_k=4, names=["bm25", "dense"])
    assert [r.chunk.pk for r in fused] == [r.chunk_id for r in expected]
    assert [r.score for r in fused] == pytest.approx([r.score for r in expected])
    legs = {r.chunk.document.external_id: r.metadata["legs"] for r in fused}
    assert legs["c"]["bm25"]["rank"] == 1  # the only text with "needle" (and "north")
    assert legs["a"]["dense"] == {"score": pytest.approx(1.0), "rank": 1}  # exactly "north"
    assert set(legs["c"]) == {"bm25", "dense"}


@pytest.mark.django_db
def test_a_failing_leg_is_marked_and_the_others_answer(compass, retrieval_settings):
    retrieval_settings(RETRIEVERS={"broken": BROKEN})
    hybrid = HybridRetriever(retrievers={"bm25": 1.0, "broken": 1.0})
    results = hybrid.retrieve("north", collection=compass, top_k=3)
    assert results and all(
        r.metadata["failed_legs"] == {"broken": "RetrievalError: backend is down"} for r in results
    )
    assert all(set(r.metadata["legs"]) == {"bm25"} for r in results)


@pytest.mark.django_db
def test_all_legs_failing_raises(compass, retrieval_settings):
    retrieval_settings(RETRIEVERS={"broken": BROKEN, "also-broken": BROKEN})
    with pytest.raises(
        RetrievalError, match="Every retriever of the hybrid failed: broken: .*also-broken"
    ):
        HybridRetriever(retrievers=["broken", "also-broken"]).retrieve("north", collection=compass)


@pytest.mark.django_db
def test_bm25_is_ranked_by_the_database_while_the_caller_embeds_the_query(compass):
    events: list[tuple[str, str, int]] = []
    dense, bm25 = retrievers["dense"], retrievers["bm25"]
    prepare, send_rank = dense.prepare, bm25.send_rank

    def record(event: str) -> None:
        # pipeline_status: 1 while queries are sent without waiting for their results.
        status = connection.connection.info.pipeline_status
        events.append((event, threading.current_thread().name, int(status)))

    def recording_prepare(*args, **kwargs):
        record("dense.prepare")
        return prepare(*args, **kwargs)

    def recording_send(*args, **kwargs):
        fetch = send_rank(*args, **kwargs)
        record("bm25.sent")
        return lambda: record("bm25.read") or fetch()

    dense.prepare, bm25.send_rank = recording_prepare, recording_send
    try:
        # Inside this test's transaction: the legs must see its uncommitted chunks.
        fused = HybridRetriever(retrievers={"bm25": 1.0, "dense": 1.0}).retrieve(
            "north", collection=compass, top_k=4
        )
    finally:
        del dense.prepare, bm25.send_rank
    caller = threading.current_thread().name
    assert events == [
        ("bm25.sent", caller, 1),
        ("dense.prepare", caller, 1),
        ("bm25.read", caller, 1),
    ]
    assert connection.connection.info.pipeline_status == 0  # back to normal afterwards
    expected = fused_legs("north", compass)
    assert [r.chunk.pk for r in fused] == [r.chunk_id for r in expected]


@pytest.mark.django_db(transaction=True)
def test_a_failing_query_sent_ahead_fails_its_leg_only(compass):
    # Outside a transaction: the error ends the pipeline, not the connection.
    with connection.cursor() as cursor:
        cursor.execute("ALTER FUNCTION retrieval_bm25_top_k RENAME TO retrieval_bm25_top_k_away")
    try:
        results = HybridRetriever(retrievers={"bm25": 1.0, "dense": 1.0}).retrieve(
            "north", collection=compass, top_k=3
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute(
                "ALTER FUNCTION retrieval_bm25_top_k_away RENAME TO retrieval_bm25_top_k"
            )
    assert results and all(set(r.metadata["failed_legs"]) == {"bm25"} for r in results)
    assert all(set(r.metadata["legs"]) == {"dense"} for r in results)
    assert connection.connection.info.pipeline_status == 0
    assert retrievers["bm25"].rank("north", collection=compass, top_k=3)


def backend_pid(wrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


POOLED = pytest.mark.django_db(transaction=True, databases=["default", "pooled"])


@POOLED
def test_with_a_pool_the_dense_leg_ranks_on_a_second_connection_beside_bm25(
    compass, pooled_database, retrieval_settings
):
    retrieval_settings(SEARCH_DATABASE=pooled_database)  # the same database, pooled
    caller = connections[pooled_database]
    caller_pid, seen = backend_pid(caller), []
    dense = retrievers["dense"]
    rank_prepared = dense.rank_prepared

    def recording_rank(*args, **kwargs):
        # The BM25 leg's query is still in flight on the caller's connection.
        seen.append(
            (backend_pid(connections[pooled_database]), caller.connection.info.pipeline_status)
        )
        return rank_prepared(*args, **kwargs)

    dense.rank_prepared = recording_rank
    try:
        fused = HybridRetriever(retrievers={"bm25": 1.0, "dense": 1.0}).retrieve(
            "north", collection=compass, top_k=4
        )
    finally:
        del dense.rank_prepared
    [(pid, status)] = seen
    assert pid != caller_pid and status == 1
    assert connections[pooled_database] is caller
    assert caller.connection.info.pipeline_status == 0
    assert caller.pool.get_stats()["pool_available"] >= 1  # the second one went back
    expected = fused_legs("north", compass)
    assert [r.chunk.pk for r in fused] == [r.chunk_id for r in expected]
    assert [r.score for r in fused] == pytest.approx([r.score for r in expected])


@POOLED
def test_no_second_connection_in_a_transaction_from_an_empty_pool_or_without_a_pool(
    pooled_database,
):
    from django.db import transaction

    caller = connections[pooled_database]
    with _spare_connection(pooled_database) as spare:
        assert spare and connections[pooled_database] is not caller
        assert backend_pid(connections[pooled_database]) != backend_pid(caller)
    assert connections[pooled_database] is caller
    with transaction.atomic(using=pooled_database):  # its uncommitted writes: this one only
        with _spare_connection(pooled_database) as spare:
            assert not spare and connections[pooled_database] is caller
    pool, held = caller.pool, []
    while pool.get_stats()["pool_available"]:
        held.append(pool.getconn())
    try:
        with _spare_connection(pooled_database) as spare:  # never waits for one
            assert not spare and connections[pooled_database] is caller
    finally:
        for borrowed in held:
            pool.putconn(borrowed)
    with _spare_connection("default") as spare:  # no pool: a connect per search
        assert not spare


def test_bad_options_and_checks(retrieval_settings):
    with pytest.raises(ValueError, match="Unknown fusion 'max'"):
        HybridRetriever(method="max")
    with pytest.raises(ValueError, match="at least one"):
        HybridRetriever(retrievers={})
    with pytest.raises(ValueError, match="non-negative"):
        HybridRetriever(retrievers={"bm25": -1})
    retrieval_settings(
        RETRIEVERS={
            "loop": {
                "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
                "OPTIONS": {"retrievers": ["loop", "ghost"]},
            }
        }
    )
    messages = [m.msg for m in retrievers["loop"].check()]
    assert messages == [
        "Hybrid retriever 'loop' fuses 'loop', which is itself.",
        "Hybrid retriever 'loop' fuses 'ghost', which is not in RETRIEVERS.",
    ]


def full_scores(query: str, collection) -> dict[str, dict[int, float]]:
    """Every chunk's BM25 score (those holding a query term) and dense similarity."""
    return {
        alias: {
            s.chunk_id: s.score
            for s in retrievers[alias].rank(query, collection=collection, top_k=100)
        }
        for alias in ("bm25", "dense")
    }


@pytest.mark.django_db
def test_each_leg_scores_given_chunks_as_it_ranks_them_within_the_collection(compass):
    other = collection_of("elsewhere", {"x": "north north needle"})
    query = "north needle"
    full = full_scores(query, compass)
    ids = sorted(Chunk.objects.filter(collection=compass).values_list("pk", flat=True))
    stranger = Chunk.objects.get(collection=other).pk  # holds both terms, in another collection
    bm25, dense = retrievers["bm25"], retrievers["dense"]
    terms, vector = (r.prepare(query, collection=compass) for r in (bm25, dense))
    scored = bm25.score_chunks(terms, [*ids, stranger], collection=compass)
    assert scored == pytest.approx(full["bm25"])  # "b" holds neither term: left out, 0
    assert len(full["bm25"]) == 3
    similarities = dense.score_chunks(vector, [*ids, stranger], collection=compass)
    assert similarities == pytest.approx(full["dense"]) and set(similarities) == set(ids)
    with pytest.raises(DimensionMismatchError):
        dense.score_chunks([1.0, 0.0], ids, collection=compass)
    threshold = DenseRetriever(score_threshold=0.5).score_chunks(vector, ids, collection=compass)
    assert threshold == pytest.approx({i: s for i, s in full["dense"].items() if s >= 0.5})
    assert len(threshold) == 3  # "b" (east, up) is orthogonal to "north"


@pytest.mark.django_db
def test_relative_to_best_scores_every_candidate_with_every_leg(compass):
    query = "north needle"  # BM25 ranks "c" first (both terms), dense "a" ("north" alone)
    legs = [Leg("bm25", retrievers["bm25"], query), Leg("dense", retrievers["dense"], query, 2.0)]
    ranked = run_legs(legs, collection=compass, top_k=1, filters=Filters.parse(None))
    fused = ranked.fuse("relative_to_best", top_k=10)
    full = full_scores(query, compass)
    pk = {c.document.external_id: c.pk for c in Chunk.objects.filter(collection=compass)}
    a, c = pk["a"], pk["c"]
    assert [s.chunk_id for s in ranked.ranked["bm25"]] == [c]
    assert [s.chunk_id for s in ranked.ranked["dense"]] == [a]
    best = {alias: max(scores.values()) for alias, scores in full.items()}
    expected = {
        i: full["bm25"][i] / best["bm25"] + 2.0 * full["dense"][i] / best["dense"] for i in (a, c)
    }
    assert {s.chunk_id: s.metadata["raw_score"] for s in fused} == pytest.approx(expected)
    legs_of = {s.chunk_id: s.metadata["legs"] for s in fused}
    assert legs_of[c] == {
        "bm25": {"score": pytest.approx(full["bm25"][c]), "rank": 1},
        "dense": {"score": pytest.approx(full["dense"][c])},  # scored for fusion: no rank
    }
    assert legs_of[a] == {
        "bm25": {"score": pytest.approx(full["bm25"][a])},
        "dense": {"score": pytest.approx(1.0), "rank": 1},
    }


@pytest.mark.django_db
def test_a_leg_that_cannot_score_given_chunks_or_fails_to_counts_them_as_zero(compass, caplog):
    query = "north needle"
    full = full_scores(query, compass)
    pk = {c.document.external_id: c.pk for c in Chunk.objects.filter(collection=compass)}
    for sparse in (RankOnlyRetriever(), FailingScorerRetriever()):
        legs = [Leg("sparse", sparse, query), Leg("dense", retrievers["dense"], query)]
        ranked = run_legs(legs, collection=compass, top_k=1, filters=Filters.parse(None))
        fused = {s.chunk_id: s for s in ranked.fuse("relative_to_best", top_k=10)}
        # "a", dense's only candidate, has no sparse score; "c" gets dense's.
        assert set(fused[pk["a"]].metadata["legs"]) == {"dense"}
        assert fused[pk["a"]].metadata["raw_score"] == pytest.approx(1.0)
        assert fused[pk["c"]].metadata["raw_score"] == pytest.approx(1.0 + full["dense"][pk["c"]])
    assert "could not score the other legs' candidates" in caplog.text  # the failing one


@pytest.mark.django_db
def test_hybrid_relative_to_best_fuses_its_legs_candidates_with_every_score(compass):
    query = "north needle"  # one candidate each: "c" from BM25, "a" from dense
    hybrid = HybridRetriever(
        retrievers={"bm25": 1.0, "dense": 1.25}, method="relative_to_best", candidates=1
    )
    [fused] = hybrid.retrieve(query, collection=compass, top_k=1)
    full = full_scores(query, compass)
    best = {alias: max(scores.values()) for alias, scores in full.items()}
    expected = {
        s.chunk_id: full["bm25"][s.chunk_id] / best["bm25"]
        + 1.25 * full["dense"][s.chunk_id] / best["dense"]
        for alias in ("bm25", "dense")
        for s in retrievers[alias].rank(query, collection=compass, top_k=1)
    }
    # Each scored by both legs, "c" wins (1 + 1.25 · 0.71); by its own leg only, "a" would (1.25).
    assert fused.chunk.document.external_id == "c"
    assert fused.metadata["raw_score"] == pytest.approx(max(expected.values()))
    assert fused.score == pytest.approx(max(expected.values()) / 2.25)  # over the weights


#: Pages of one or two chunks, read without a header (the keyword embedder knows north, east
#: and up; BM25 every word but stopwords). BM25 ranks the steel page's first chunk above its
#: second, dense its second above its first.
PAGES = {
    "steel": "Needle, needle, needle.\n\nNorth winds and rain over the long wide valley.",
    "pointer": "A needle points north, east and up.",
    "wind": "East wind.",
    "hay": "One needle lost in a long field of hay, grass, rocks, mud and more hay.",
}


@pytest.mark.django_db
def test_the_hybrid_floors_each_documents_leading_chunk_by_the_documents_best_in_each_leg(
    keyword_settings, retrieval_settings
):
    retrieval_settings(CHUNK_CONTEXT=None)
    collection, _ = get_or_create_collection("pages")
    ingest(collection, [Source.from_text(text, external_id=key) for key, text in PAGES.items()])
    query = "needle north"
    legs = [
        retrievers[alias].rank(query, collection=collection, top_k=100)
        for alias in ("bm25", "dense")
    ]
    chunks = Chunk.objects.filter(collection=collection)
    documents = dict(chunks.values_list("pk", "document_id"))
    floored = relative_score_fuse(legs, top_k=6, documents=documents, document_floor=0.8)
    plain = relative_score_fuse(legs, top_k=6)
    steel = [r for r in legs[0] if documents[r.chunk_id] == documents[legs[1][0].chunk_id]]
    assert len(steel) == 2 and steel[0].chunk_id != legs[1][0].chunk_id  # the legs disagree
    raised = {r.chunk_id: r.score for r in floored}.items() - {
        r.chunk_id: r.score for r in plain
    }.items()
    assert len(raised) == 1  # the steel page's leader, and nothing else
    found = search(query, collection=collection, top_k=6, scope=Scope.ALL)
    assert [r.chunk.pk for r in found] == [r.chunk_id for r in floored]
    assert [r.score for r in found] == pytest.approx([r.score for r in floored])
    retrieval_settings(FUSION={"method": "relative_score", "k": 60, "document_floor": 0})
    found = search(query, collection=collection, top_k=6, scope=Scope.ALL)
    assert [r.score for r in found] == pytest.approx([r.score for r in plain])
