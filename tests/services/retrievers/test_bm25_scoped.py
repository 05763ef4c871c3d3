"""BM25 under filters and document scopes: exactly the exhaustive scoped top k, by each of
the planner's ways (the scope's chunks found through the index's scope marks, the top-k
function with the marks in its look-ups, over-fetching the pruned top k, the exhaustive
plan), for scopes of several selectivities."""

from __future__ import annotations

import random

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from retrieval.models import Chunk
from retrieval.services.access import Scope
from retrieval.services.core.filters import (
    Filters,
    allowed_chunks,
    estimated_rows,
    estimated_rows_each,
)
from retrieval.services.indexes.pgvector import PgvectorIndex, lexeme_index_name
from retrieval.services.indexes.scopes import scope_parts
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.retrievers.bm25 import BM25Retriever
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.sparse.scoped import CHUNK_COUNT_SQL
from tests.conftest import analyze_tables

from .test_bm25_pruning import VOCABULARY, queries, texts
from .test_dense_scope_indexes import index_exists

pytestmark = pytest.mark.django_db

#: A text held by several documents (equal scores), of words rare elsewhere.
TWIN = "w390x w391x w392x w393x w390x"
#: Share of the documents tagged with each tag (independent draws; nested).
SHARES = {"half": 0.5, "tenth": 0.1, "one": 0.01}


@pytest.fixture
def scoped(keyword_settings, retrieval_settings):
    """A collection of 1,200 Zipf texts tagged ``half`` / ``tenth`` / ``one`` (a few
    ``few``), visible to group ``readers`` with the same shares, plus eight twins."""
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    readers = Group.objects.create(name="readers")
    rng = random.Random(38)
    # A neighbour with the same words and tags: its chunks must never be ranked in "zipf".
    for name in ("neighbour", "zipf"):
        collection, _ = get_or_create_collection(name)
        entries = list(texts(rng, 1200, "d").items())
        entries += [(f"twin{i}", TWIN) for i in range(8)]
        sources = []
        for i, (key, text) in enumerate(entries):
            tags = [tag for tag, share in SHARES.items() if rng.random() < share]
            if key.startswith("twin"):
                tags = ["half", "tenth"] if i % 2 else []
            if i in (5, 600, 1100):
                tags.append("few")
            seen = rng.random() < 0.1 or key in ("twin1", "twin4")
            access = (f"group:{readers.pk}",) if seen else ()
            sources.append(
                Source.from_text(text, external_id=key, metadata={"tags": tags}, access=access)
            )
        assert ingest(collection, sources).status == "succeeded"
    analyze_tables()
    reader = get_user_model().objects.create_user("reader")
    reader.groups.add(readers)
    return collection, rng, reader


def scopes(collection, reader) -> dict[str, Filters]:
    """Filters of every selectivity, from everything down to nothing."""
    found = {
        f"tag {tag}": Filters.parse({"metadata": {"tags": [tag]}})
        for tag in ("half", "tenth", "one", "few", "absent")
    }
    found["visible to the reader"] = Scope.for_user(reader).filters()
    found["visible to the reader, tag half"] = Scope.for_user(reader).filters(
        {"metadata": {"tags": ["half"]}}
    )
    found["two documents"] = Filters.parse({"documents": ["d3", "twin1"]})
    return found


def assert_exact(retriever: BM25Retriever, collection, filters: Filters, searches) -> None:
    """``retriever`` returns the exhaustive scoped top k for every query and k.

    Up to ties: chunks of equal score may swap, so the score sequences are compared, and
    each chunk's score with its exact one; every chunk is one the filters allow.
    """
    exhaustive = BM25Retriever(prune=False)
    permitted = set(filters.chunk_ids(collection.pk))
    analyzer = Analyzer()
    for words in searches:
        terms = analyzer.terms(" ".join(words))
        every = dict(exhaustive.score(terms, collection=collection, top_k=10_000, filters=filters))
        assert set(every) <= permitted
        for top_k in (1, 10, 40):
            ours = retriever.score(terms, collection=collection, top_k=top_k, filters=filters)
            full = list(every.values())[:top_k]
            assert [s for _, s in ours] == pytest.approx(full, rel=1e-12), words
            for chunk_id, score in ours:
                assert every[chunk_id] == pytest.approx(score, rel=1e-12), (words, chunk_id)


#: The planner left to choose; always over-fetching; always through the scope marks;
#: the top-k function under every exactly marked scope (the others over-fetch);
#: over-fetching with so small a cap that most scopes end in the exhaustive plan.
PLANS = {
    "default": {},
    "over-fetch": {"scope_scan_limit": 0, "scope_pruning_share": 0},
    "scope marks": {"scope_scan_limit": 1_000_000},
    "scoped top-k": {"scope_scan_limit": 0, "scope_pruning_share": 1},
    "capped over-fetch": {"scope_scan_limit": 0, "scope_pruning_share": 0, "max_over_fetch": 40},
}


@pytest.mark.parametrize("plan", PLANS)
def test_scoped_top_k_is_the_exhaustive_scoped_top_k(scoped, plan):
    collection, rng, reader = scoped
    retriever = BM25Retriever(**PLANS[plan])
    searches = queries(rng, 30) + [["w390x", "w391x"], ["w392x", "w3x", "w393x"]]
    for filters in scopes(collection, reader).values():
        assert_exact(retriever, collection, filters, searches)


def test_ties_at_the_cut_keep_the_exhaustive_scores(scoped):
    """Twins score alike; a scope holding some of them gets exactly those, each once."""
    collection, _, reader = scoped
    terms = Analyzer().terms(TWIN)
    twins = set(
        Chunk.objects.filter(
            collection=collection, document__external_id__startswith="twin"
        ).values_list("pk", flat=True)
    )
    for options in PLANS.values():
        retriever = BM25Retriever(**options)
        for filters in (
            Filters.parse({"metadata": {"tags": ["half"]}}),
            Scope.for_user(reader).filters(),
        ):
            ranked = retriever.score(terms, collection=collection, top_k=3, filters=filters)
            expected = twins & set(filters.chunk_ids(collection.pk))
            top = [chunk_id for chunk_id, _ in ranked]
            assert len(set(top)) == len(top) == min(3, len(expected))
            assert set(top) <= expected
            assert len({round(score, 9) for _, score in ranked}) == 1


def top_k_calls(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if "retrieval_bm25_top_k(" in q["sql"]]


def posting_scans(captured) -> list[str]:
    """The exhaustive plan's statements (every allowed posting ranked)."""
    return [q["sql"] for q in captured.captured_queries if "retrieval_bm25_posting p" in q["sql"]]


def marked_queries(captured) -> list[str]:
    """The marked plan's statements (the scope's chunks found through the index)."""
    sqls = [q["sql"] for q in captured.captured_queries]
    return [sql for sql in sqls if "retrieval_bm25_scope_query(" in sql]


def test_a_small_scope_is_ranked_through_its_marks(scoped):
    collection, _, reader = scoped
    terms = Analyzer().terms(" ".join(VOCABULARY[100:104]))
    with CaptureQueriesContext(connection) as captured:
        BM25Retriever(scope_scan_limit=50).score(
            terms, collection=collection, top_k=10, filters={"metadata": {"tags": ["few"]}}
        )
    assert top_k_calls(captured) == []
    assert not posting_scans(captured)
    (marked,) = marked_queries(captured)
    # The marks are exactly the scope: the function's top k, no check of each chunk.
    assert "retrieval_bm25_marked_top_k(" in marked and "EXISTS" not in marked


def test_a_scope_too_narrow_to_over_fetch_goes_to_the_exhaustive_plan_at_once(scoped):
    """Above the scan limit, and too narrow for 40 of its chunks to be among the top 200:
    neither over-fetched nor scored chunk by chunk, but ranked from its postings."""
    collection, rng, _ = scoped
    filters = Filters.parse({"metadata": {"tags": ["tenth"]}})
    retriever = BM25Retriever(scope_scan_limit=0, scope_pruning_share=0, max_over_fetch=200)
    terms = Analyzer().terms(" ".join(VOCABULARY[100:104]))
    with CaptureQueriesContext(connection) as captured:
        retriever.score(terms, collection=collection, top_k=40, filters=filters)
    assert top_k_calls(captured) == []
    assert posting_scans(captured)
    assert_exact(retriever, collection, filters, queries(rng, 10))


def test_a_wide_scope_over_fetches_the_pruned_top_k(scoped):
    collection, _, _ = scoped
    terms = Analyzer().terms(" ".join(VOCABULARY[30:34]))
    with CaptureQueriesContext(connection) as captured:
        BM25Retriever(scope_scan_limit=50).score(
            terms, collection=collection, top_k=10, filters={"metadata": {"tags": ["half"]}}
        )
    assert len(top_k_calls(captured)) == 1
    assert not marked_queries(captured)


def test_a_middling_exactly_marked_scope_is_ranked_by_the_top_k_function_with_its_marks(scoped):
    """A tenth of the chunks, above the scan limit: one call of the top-k function, the
    scope's marks in its look-ups, and its ranking is the exhaustive scoped one."""
    collection, rng, reader = scoped
    retriever = BM25Retriever(scope_scan_limit=50)
    terms = Analyzer().terms(" ".join(VOCABULARY[30:34]))
    for filters in (
        {"metadata": {"tags": ["tenth"]}},
        Scope.for_user(reader).filters(),
    ):
        with CaptureQueriesContext(connection) as captured:
            retriever.score(terms, collection=collection, top_k=10, filters=filters)
        assert len(top_k_calls(captured)) == 1
        assert marked_queries(captured) == top_k_calls(captured)
        assert not posting_scans(captured)
        assert_exact(retriever, collection, Filters.parse(filters), queries(rng, 10))


@pytest.mark.parametrize(
    "metadata",
    [{"tags": [{"x": 1}]}, {"tags": [["tenth"]]}, {"tags": []}, {"tags": ["tenth"], "e": {}}],
)
def test_a_scope_the_marks_do_not_express_exactly_is_never_ranked_by_them(scoped, metadata):
    """Objects or arrays inside an array, or an empty one: the marks find a superset, so
    the top-k function would prune with the wrong chunks' scores; it is not called
    with them."""
    collection, _, _ = scoped
    retriever = BM25Retriever(scope_scan_limit=0, scope_pruning_share=1)
    terms = Analyzer().terms(" ".join(VOCABULARY[30:34]))
    with CaptureQueriesContext(connection) as captured:
        retriever.score(terms, collection=collection, top_k=10, filters={"metadata": metadata})
    assert not marked_queries(captured)


def test_an_overestimated_scope_widens_until_k_survive(scoped):
    """Statistics from before most chunks lost their tag: the planner expects half the
    chunks to survive, a few do, and the over-fetch widens; still exact."""
    collection, rng, _ = scoped
    with connection.cursor() as cursor:
        # Every 20th tagged chunk keeps its tag, counted in order (not by id, which
        # depends on the tests run before).
        cursor.execute(
            "UPDATE retrieval_chunk SET metadata = '{\"tags\": []}' WHERE id IN ("
            "SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) AS n "
            "FROM retrieval_chunk WHERE collection_id = %s "
            'AND metadata @> \'{"tags": ["half"]}\') AS tagged WHERE n %% 20 <> 0)',
            [collection.pk],
        )
    filters = Filters.parse({"metadata": {"tags": ["half"]}})
    terms = Analyzer().terms(" ".join(VOCABULARY[30:34]))
    retriever = BM25Retriever(scope_scan_limit=0)
    with CaptureQueriesContext(connection) as captured:
        ranked = retriever.score(terms, collection=collection, top_k=10, filters=filters)
    assert len(top_k_calls(captured)) >= 2
    assert len(ranked) == 10
    assert_exact(retriever, collection, filters, queries(rng, 10) + [VOCABULARY[30:34]])
    # Widening stops at max_over_fetch: then every allowed posting is ranked.
    capped = BM25Retriever(scope_scan_limit=0, max_over_fetch=60)
    with CaptureQueriesContext(connection) as captured:
        capped.score(terms, collection=collection, top_k=10, filters=filters)
    assert posting_scans(captured)
    assert_exact(capped, collection, filters, queries(rng, 10) + [VOCABULARY[30:34]])


def test_nothing_allowed_returns_nothing(scoped):
    collection, _, _ = scoped
    terms = Analyzer().terms("w1x w2x")
    for options in PLANS.values():
        ranked = BM25Retriever(**options).score(
            terms, collection=collection, top_k=10, filters={"metadata": {"tags": ["absent"]}}
        )
        assert ranked == []


def test_options_are_checked():
    with pytest.raises(ValueError, match="scope_scan_limit"):
        BM25Retriever(scope_scan_limit=-1)
    with pytest.raises(ValueError, match="max_over_fetch"):
        BM25Retriever(max_over_fetch=0)
    for share in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="scope_pruning_share"):
            BM25Retriever(scope_pruning_share=share)


def even_documents(user) -> Q:
    """A ``DOCUMENT_ACCESS`` hook, which the index's scope marks cannot express."""
    return Q(external_id__regex=r"[02468]$")


def test_a_hook_beside_the_marked_tokens_is_checked_exactly(scoped, retrieval_settings):
    """The marks find the reader's visible chunks, a superset of what the hook allows:
    each result is checked against the whole scope."""
    collection, rng, reader = scoped
    visible = set(Scope.for_user(reader).filters().chunk_ids(collection.pk))
    retrieval_settings(DOCUMENT_ACCESS=f"{__name__}.even_documents")
    filters = Scope.for_user(reader).filters()
    assert filters.reader is not None and filters.reader.others is not None
    assert 0 < len(filters.chunk_ids(collection.pk)) < len(visible)
    searches = queries(rng, 20)
    for options in (PLANS["scope marks"], PLANS["default"]):
        assert_exact(BM25Retriever(**options), collection, filters, searches)
    with CaptureQueriesContext(connection) as captured:
        BM25Retriever(**PLANS["scope marks"]).score(
            Analyzer().terms(" ".join(searches[0])),
            collection=collection,
            top_k=10,
            filters=filters,
        )
    (marked,) = marked_queries(captured)
    assert "retrieval_bm25_marked_top_k(" in marked and "EXISTS" in marked


def index_scans(name: str) -> int:
    """Scans of the index ``name`` in this transaction (the test's)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", [name])
        return cursor.fetchone()[0]


def reader_token(reader) -> str:
    return f"group:{reader.groups.get().pk}"


def declare(collection, declared) -> PgvectorIndex:
    """Declare a scope on the fixture's collection, its indexes built now: the checks its
    chunks' writes deferred are run first (CREATE INDEX refuses to wait for them)."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    index = PgvectorIndex()
    index.add_scope_index(collection, declared)
    return index


@pytest.mark.parametrize(
    "declared, filters",
    [
        ({"metadata": {"tags": ["tenth"]}}, {"metadata": {"tags": ["tenth"]}}),
        ({"metadata": {"tags": ["tenth"]}}, {"metadata": {"tags": ["half", "tenth"]}}),
        ("reader", "reader"),
    ],
    ids=["the scope", "inside the scope", "a reader holding the scope's token"],
)
def test_a_declared_scope_is_ranked_with_its_own_lexeme_index(scoped, declared, filters):
    """Declaring a scope builds a GIN index of its chunks' lexemes; a search the scope
    implies reads it (and a reader's scope ranks the declared token's part through it),
    exactly as the exhaustive plan ranks."""
    collection, rng, reader = scoped
    if declared == "reader":
        declared, filters = {"access": reader_token(reader)}, Scope.for_user(reader).filters()
    declare(collection, declared)
    name = lexeme_index_name(collection.pk, declared)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        assert "retrieval_bm25_chunk USING gin (lexemes)" in cursor.fetchone()[0]
    retriever = BM25Retriever(scope_scan_limit=0)
    terms = Analyzer().terms(" ".join(VOCABULARY[30:34]))
    before = index_scans(name)
    with CaptureQueriesContext(connection) as captured:
        retriever.score(terms, collection=collection, top_k=10, filters=filters)
    assert index_scans(name) > before
    assert any("NULL, NULL" in sql for sql in top_k_calls(captured))  # the declared marks
    assert_exact(retriever, collection, Filters.parse(filters), queries(rng, 10))


def test_a_declared_scopes_lexeme_index_goes_with_it_and_its_absence_costs_only_time(scoped):
    collection, rng, reader = scoped
    declared = {"metadata": {"tags": ["tenth"]}}
    index = declare(collection, declared)
    name = lexeme_index_name(collection.pk, declared)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {name}")
    retriever = BM25Retriever(scope_scan_limit=0)
    assert_exact(retriever, collection, Filters.parse(declared), queries(rng, 10))
    index.ensure_space(collection)  # built again when missing
    assert index_scans(name) == 0 and index_exists(name)
    assert index.remove_scope_index(collection, declared)
    assert not index_exists(name)
    index.add_scope_index(collection, declared)
    index.drop_space(collection.pk)
    assert not index_exists(name)


def test_a_reader_s_scope_ranked_in_parts_is_planned_and_ranked_in_one_statement_each(scoped):
    """A reader's scope ranked in parts (its declared token's, the rest) reads the
    collection's size once, estimates the parts' sizes in one plan, and ranks the parts
    in one statement when each is ranked in one; exactly as the exhaustive plan ranks."""
    collection, rng, reader = scoped
    declare(collection, {"access": reader_token(reader)})
    filters = Scope.for_user(reader).filters()
    assert len(scope_parts(collection, filters)) == 2
    retriever = BM25Retriever()
    with CaptureQueriesContext(connection) as captured:
        retriever.score(
            Analyzer().terms(" ".join(VOCABULARY[30:34])),
            collection=collection,
            top_k=10,
            filters=filters,
        )
    statements = [query["sql"] for query in captured.captured_queries]
    size = CHUNK_COUNT_SQL.removesuffix("%s")  # the captured SQL holds the collection's id
    assert sum(size in sql for sql in statements) == 1
    assert sum(sql.startswith("EXPLAIN") for sql in statements) == 1
    (ranking,) = [sql for sql in statements if "retrieval_bm25_top_k" in sql]
    assert len(statements) == 3  # the size, the estimates, the ranking
    assert "UNION ALL" in ranking and "retrieval_bm25_marked_top_k(" in ranking  # the rest
    assert_exact(retriever, collection, filters, queries(rng, 10))


def test_the_parts_estimates_planned_together_are_each_part_s_own(scoped):
    collection = scoped[0]
    queries_ = [
        allowed_chunks(collection.pk, *Filters.parse(f).sql("c", collection_id=collection.pk))
        for f in ({"metadata": {"tags": ["half"]}}, {"metadata": {"tags": ["one"]}})
    ]
    queries_.append(("SELECT 1 FROM retrieval_chunk WHERE false", []))  # planned away
    with connection.cursor() as cursor:
        alone = [estimated_rows(cursor, sql, params) for sql, params in queries_]
        assert alone[0] > 10 * alone[1] > 0
        assert estimated_rows_each(cursor, queries_[:2]) == alone[:2]
        assert estimated_rows_each(cursor, queries_) == alone
