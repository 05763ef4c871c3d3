"""BM25 top-k (``retrieval_bm25_top_k``): the exhaustive ranking, through writes and deletes,
reading a fraction of the postings."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.models import Chunk, Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.retrievers.bm25 import MAX_PRUNED_TERMS, BM25Retriever
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.sparse.index import write_postings
from retrieval.services.sparse.ranking import TOP_K_SQL
from tests.conftest import analyze_tables

pytestmark = pytest.mark.django_db

# Zipf-like: word i appears with weight 1 / (i + 1), so a few words are in most texts.
VOCABULARY = [f"w{i}x" for i in range(400)]
WEIGHTS = [1 / (i + 1) for i in range(len(VOCABULARY))]


def texts(rng: random.Random, count: int, prefix: str) -> dict[str, str]:
    return {
        f"{prefix}{i}": " ".join(rng.choices(VOCABULARY, WEIGHTS, k=rng.randint(5, 60)))
        for i in range(count)
    }


def queries(rng: random.Random, count: int) -> list[list[str]]:
    """Queries of 1-9 words: frequent ones beside rare ones, as real queries are."""
    return [
        rng.sample(VOCABULARY[:20], rng.randint(0, 4)) + rng.sample(VOCABULARY, rng.randint(1, 5))
        for _ in range(count)
    ]


@pytest.fixture
def zipf(keyword_settings, retrieval_settings):
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    rng = random.Random(7)
    # A neighbour with the same words: its chunks must never be ranked in "zipf".
    for name in ("neighbour", "zipf"):
        collection, _ = get_or_create_collection(name)
        sources = [Source.from_text(t, external_id=k) for k, t in texts(rng, 1200, "d").items()]
        assert ingest(collection, sources).status == "succeeded"
    analyze_tables()
    return collection, rng


def posting_reads(cursor) -> tuple[int, int]:
    """Index tuples this transaction has read from the postings, and from the chunks' terms."""
    cursor.execute(
        "SELECT pg_stat_get_xact_tuples_returned('retrieval_bm25_posting_pkey'::regclass), "
        "pg_stat_get_xact_tuples_returned('retrieval_bm25_chunk_lexemes'::regclass)"
    )
    return cursor.fetchone()


def common_queries(rng: random.Random, count: int) -> list[list[str]]:
    """Queries of 5-8 frequent words: chunks hold many of them, so term sets of 3 or more
    decide which chunks can reach the top k."""
    return [rng.sample(VOCABULARY[:40], rng.randint(5, 8)) for _ in range(count)]


def assert_same_rankings(
    collection, rng: random.Random, *, count: int = 80, searches: list[list[str]] | None = None
) -> None:
    """The top-k function and the exhaustive plan agree for every query and k.

    Agree up to ties: chunks of equal score (summed in another order, so they may
    differ in the last bit) can swap places, so each chunk's score is checked against
    its exact score, and the score sequences against each other.
    """
    analyzer = Analyzer()
    pruned, exhaustive = BM25Retriever(), BM25Retriever(prune=False)
    for words in searches or queries(rng, count):
        terms = analyzer.terms(" ".join(words))
        every = dict(exhaustive.score(terms, collection=collection, top_k=10_000))
        for top_k in (1, 10, 40):
            ours = pruned.score(terms, collection=collection, top_k=top_k)
            full = exhaustive.score(terms, collection=collection, top_k=top_k)
            assert [s for _, s in ours] == pytest.approx([s for _, s in full], rel=1e-12), words
            for chunk_id, score in ours:
                assert every[chunk_id] == pytest.approx(score, rel=1e-12), (words, chunk_id)


def chunk_terms_match(collection) -> bool:
    """``retrieval_bm25_chunk`` holds exactly each chunk's postings (tfs, lexemes, dl); its
    lexemes mark the terms it holds more than once, then hold the chunk's scope marks."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT chunk_id, max(dl) AS dl, "
            "jsonb_object_agg(term, tf) AS tfs, "
            "array_to_tsvector(array_agg(collection_id || ':' || term) "
            "|| coalesce(array_agg(collection_id || '+:' || term) FILTER (WHERE tf > 1), '{}') "
            "|| coalesce((SELECT retrieval_bm25_marks(k.collection_id, k.document_id, "
            "    k.access, k.metadata) FROM retrieval_chunk k WHERE k.id = chunk_id), '{}')) "
            "AS lexemes "
            "FROM retrieval_bm25_posting WHERE collection_id = %s GROUP BY chunk_id) AS p "
            "FULL JOIN (SELECT * FROM retrieval_bm25_chunk WHERE collection_id = %s) AS c "
            "USING (chunk_id) "
            "WHERE c.chunk_id IS NULL OR p.chunk_id IS NULL OR c.dl <> p.dl OR c.tfs <> p.tfs "
            "OR c.lexemes <> p.lexemes",
            [collection.pk, collection.pk],
        )
        return cursor.fetchone()[0] == 0


def bounds_hold(collection) -> bool:
    """Every term's stored bounds (max tf, min dl per tf, min dl at tf 1) hold."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT bool_and(t.max_tf >= p.max_tf AND t.min_dl_per_tf <= p.min_dl_per_tf "
            "AND t.min_dl_at_tf1 <= p.min_dl_at_tf1) FROM "
            "retrieval_bm25_term t JOIN (SELECT term, max(tf) AS max_tf, "
            "min(dl::float8 / tf) AS min_dl_per_tf, "
            "coalesce(min(dl) FILTER (WHERE tf = 1), 2147483647) AS min_dl_at_tf1 "
            "FROM retrieval_bm25_posting WHERE collection_id = %s GROUP BY term) AS p "
            "ON p.term = t.term WHERE t.collection_id = %s",
            [collection.pk, collection.pk],
        )
        return cursor.fetchone()[0]


@contextmanager
def pilot_df_per_k(value: int) -> Iterator[None]:
    """Set the top-k function's step-1 threshold (``retrieval.bm25_pilot_df_per_k``)."""
    with connection.cursor() as cursor:
        cursor.execute("SET retrieval.bm25_pilot_df_per_k = %s", [str(value)])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET retrieval.bm25_pilot_df_per_k")


def test_top_k_equals_exhaustive(zipf):
    collection, rng = zipf
    assert bounds_hold(collection)
    assert chunk_terms_match(collection)
    assert_same_rankings(collection, rng)


def test_top_k_equals_exhaustive_for_many_frequent_terms(zipf):
    collection, rng = zipf
    assert_same_rankings(collection, rng, searches=common_queries(rng, 60))


@pytest.mark.parametrize("searches", [queries, common_queries])
def test_top_k_equals_exhaustive_when_theta_starts_from_gin(zipf, searches):
    """Step 1 (θ from chunks holding three of the top four terms) runs only for frequent
    terms in a large collection; here it is made to run on every query."""
    collection, rng = zipf
    with pilot_df_per_k(0):
        assert_same_rankings(collection, rng, searches=searches(rng, 60))


def test_top_k_reads_a_fraction_of_the_postings(zipf):
    """Postings and candidate chunks the function reads, against the postings an
    exhaustive ranking reads (every posting of every query term: their df)."""
    collection, rng = zipf
    analyzer = Analyzer()
    searches = [analyzer.terms(" ".join(words)) for words in queries(rng, 60)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(t.df) FROM unnest(%s::text[]) AS q(term) JOIN retrieval_bm25_term t "
            "ON t.collection_id = %s AND t.term = q.term",
            [[term for terms in searches for term in set(terms)], collection.pk],
        )
        read_exhaustive = cursor.fetchone()[0]
        before = posting_reads(cursor)
        for terms in searches:
            BM25Retriever().score(terms, collection=collection, top_k=10)
        after = posting_reads(cursor)
    read_pruned, candidates = after[0] - before[0], after[1] - before[1]
    assert candidates > 0
    assert read_pruned + candidates < read_exhaustive / 2, (read_pruned, candidates)


def test_still_equal_after_updates_and_deletes(zipf):
    collection, rng = zipf
    # Delete the chunks holding each frequent word most often (they set its max tf),
    # rewrite others with new texts (new lengths, new maxima), add new documents.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT ON (term) chunk_id FROM retrieval_bm25_posting "
            "WHERE collection_id = %s AND term = ANY(%s) ORDER BY term, tf DESC",
            [collection.pk, VOCABULARY[:30]],
        )
        heaviest = [row[0] for row in cursor.fetchall()]
    Document.objects.filter(chunks__in=heaviest).delete()
    rewritten = {k: t for k, t in texts(rng, 150, "d").items()}
    rewritten["d3"] = " ".join([VOCABULARY[5]] * 40 + [VOCABULARY[300]])  # a new max tf
    added = texts(rng, 100, "n")
    run = ingest(
        collection, [Source.from_text(t, external_id=k) for k, t in (rewritten | added).items()]
    )
    assert run.status == "succeeded"
    assert bounds_hold(collection)
    assert chunk_terms_match(collection)
    assert_same_rankings(collection, rng)
    top = BM25Retriever().score(Analyzer().terms(VOCABULARY[5]), collection=collection, top_k=1)
    assert Document.objects.get(chunks=top[0][0]).external_id == "d3"


def test_pruning_keeps_filters(zipf):
    collection, rng = zipf
    kept = list(Document.objects.filter(collection=collection).order_by("pk")[:300])
    filters = {"documents": [d.external_id for d in kept]}
    allowed = set(Chunk.objects.filter(document__in=kept).values_list("pk", flat=True))
    for words in queries(rng, 30):
        query = " ".join(words)
        ours = BM25Retriever().rank(query, collection=collection, filters=filters)
        full = BM25Retriever(prune=False).rank(query, collection=collection, filters=filters)
        assert [s.score for s in ours] == pytest.approx([s.score for s in full], rel=1e-12)
        assert {s.chunk_id for s in ours} <= allowed


def test_a_chunk_losing_some_postings_keeps_the_others(zipf):
    """Ingestion removes whole chunks; postings removed by hand still leave the chunks'
    terms exact (the statistics triggers, though, count each chunk touched as gone)."""
    collection, _ = zipf
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM retrieval_bm25_posting WHERE collection_id = %s AND term = ANY(%s)",
            [collection.pk, VOCABULARY[:3]],
        )
    assert chunk_terms_match(collection)


def test_an_overlong_term_is_ranked_exhaustively(zipf):
    """Terms past tsvector's limit stay out of the lexemes; a query holding one reads
    every posting instead, and still ranks right (a custom analyzer may make them)."""
    collection, _ = zipf
    long_term = "x" * 1500
    chunk_id = Document.objects.filter(collection=collection).first().chunks.get().pk
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT dl FROM retrieval_bm25_posting WHERE chunk_id = %s LIMIT 1", [chunk_id]
        )
        length = cursor.fetchone()[0]
    write_postings(collection.pk, [(chunk_id, Counter({long_term: 2}), length)])
    terms = [long_term, VOCABULARY[0], VOCABULARY[1]]
    ours = BM25Retriever().score(terms, collection=collection, top_k=10)
    full = BM25Retriever(prune=False).score(terms, collection=collection, top_k=10)
    assert ours[0][0] == chunk_id
    assert [s for _, s in ours] == pytest.approx([s for _, s in full], rel=1e-12)
    # Nor is a scoped search through the index's scope marks, which hold the same lexemes.
    document_id = Chunk.objects.get(pk=chunk_id).document_id
    scoped = BM25Retriever(scope_scan_limit=1_000_000).score(
        [long_term], collection=collection, top_k=10, filters={"document_ids": [document_id]}
    )
    assert [found for found, _ in scoped] == [chunk_id]


def test_a_query_of_many_terms_reads_every_posting(zipf):
    """Past MAX_PRUNED_TERMS distinct terms, the search over term pairs would cost more
    than reading every posting: such a query takes the exhaustive plan, same ranking."""
    collection, rng = zipf
    terms = Analyzer().terms(" ".join(rng.sample(VOCABULARY[:80], MAX_PRUNED_TERMS + 1)))
    ranked = {}
    for name, searched in (("short", terms[:MAX_PRUNED_TERMS] * 2), ("long", terms)):
        assert len(set(searched)) == len(searched) // (2 if name == "short" else 1)
        with CaptureQueriesContext(connection) as statements:
            ranked[name] = BM25Retriever().score(searched, collection=collection, top_k=10)
        uses_top_k = "retrieval_bm25_top_k" in statements[-1]["sql"]
        assert uses_top_k == (name == "short"), name
        full = BM25Retriever(prune=False).score(searched, collection=collection, top_k=10)
        assert [s for _, s in ranked[name]] == pytest.approx([s for _, s in full], rel=1e-12)
    assert ranked["long"] != ranked["short"]


def test_an_ingest_leaves_nothing_pending_in_the_lexeme_index(zipf):
    # A GIN pending list would be read whole by every top-k look-up until a vacuum.
    collection, rng = zipf
    sources = [Source.from_text(t, external_id=k) for k, t in texts(rng, 50, "late").items()]
    assert ingest(collection, sources).status == "succeeded"
    with connection.cursor() as cursor:
        cursor.execute("SELECT gin_clean_pending_list('retrieval_bm25_chunk_lexemes'::regclass)")
        assert cursor.fetchone()[0] == 0  # pending pages merged by this call: none


def test_the_function_ranks_a_query_of_more_terms_than_it_scores_exhaustively(zipf):
    """``retrieval_bm25_top_k`` scores a chunk's row for at most 16 distinct terms; called
    with more (``BM25Retriever`` never does), it reads every posting: same ranking."""
    collection, rng = zipf
    terms = Analyzer().terms(" ".join(rng.sample(VOCABULARY[:120], 24)))
    assert len(set(terms)) > MAX_PRUNED_TERMS
    with connection.cursor() as cursor:
        cursor.execute(TOP_K_SQL, [collection.pk, terms, 1.2, 0.75, 10])
        ours = [(chunk_id, float(score)) for chunk_id, score in cursor.fetchall()]
    full = BM25Retriever(prune=False).score(terms, collection=collection, top_k=10)
    assert [s for _, s in ours] == pytest.approx([s for _, s in full], rel=1e-12)


@pytest.mark.parametrize("pilot", [False, True])
def test_top_k_equals_exhaustive_at_every_query_length(zipf, pilot):
    """A chunk's row is scored over as many term slots as the query needs (4, 8 or 16,
    migration 0016): queries of 1 to 16 frequent terms, each held by many chunks, every
    term counted; with step 1 made to run (``pilot``) and without."""
    collection, rng = zipf
    searches = [rng.sample(VOCABULARY[:40], length) for length in range(1, MAX_PRUNED_TERMS + 1)]
    with pilot_df_per_k(0 if pilot else 1000):
        assert_same_rankings(collection, rng, searches=searches)


def test_top_k_equals_exhaustive_on_chunks_whose_terms_are_compressed(zipf):
    """A long chunk's term frequencies are stored compressed (past about 2 KB); the
    function decompresses them once per row (migration 0017): same ranking."""
    collection, rng = zipf
    long_texts = {
        f"long{i}": " ".join(rng.sample(VOCABULARY, 250) + rng.choices(VOCABULARY[:30], k=100))
        for i in range(60)
    }
    sources = [Source.from_text(t, external_id=k) for k, t in long_texts.items()]
    assert ingest(collection, sources).status == "succeeded"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM retrieval_bm25_chunk "
            "WHERE collection_id = %s AND pg_column_compression(tfs) IS NOT NULL",
            [collection.pk],
        )
        assert cursor.fetchone()[0] >= 60
    assert_same_rankings(collection, rng, searches=queries(rng, 40) + common_queries(rng, 40))
