"""BM25 top-k pruning: the same ranking as the exhaustive one, through writes and deletes."""

from __future__ import annotations

import random

import pytest
from django.db import connection

from retrieval.models import Document
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexing import Source, ingest
from retrieval.services.retrievers.bm25 import BM25Retriever
from retrieval.services.sparse.analyzer import Analyzer

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
    """Queries of 1-5 words: frequent ones beside rare ones, as real queries are."""
    return [
        rng.sample(VOCABULARY[:20], rng.randint(0, 3)) + rng.sample(VOCABULARY, rng.randint(1, 3))
        for _ in range(count)
    ]


@pytest.fixture
def zipf(keyword_settings, retrieval_settings):
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    collection, _ = get_or_create_collection("zipf")
    rng = random.Random(7)
    sources = [Source.from_text(t, external_id=k) for k, t in texts(rng, 1200, "d").items()]
    assert ingest(collection, sources).status == "succeeded"
    return collection, rng


def assert_same_rankings(collection, rng: random.Random, *, count: int = 80) -> int:
    """Pruned and exhaustive top-k agree for every query and k; return how many pruned.

    Agree up to ties: chunks of equal score (summed in another order, so they may
    differ in the last bit) can swap places, so each chunk's score is checked against
    its exact score, and the score sequences against each other.
    """
    analyzer = Analyzer()
    pruned, exhaustive = BM25Retriever(k1=1.2, b=0.75), BM25Retriever(prune=False)
    skipped = 0
    for words in queries(rng, count):
        terms = analyzer.terms(" ".join(words))
        every = dict(exhaustive.score(terms, collection=collection, top_k=10_000))
        for top_k in (1, 10, 40):
            ours = pruned.score(terms, collection=collection, top_k=top_k)
            full = exhaustive.score(terms, collection=collection, top_k=top_k)
            assert [s for _, s in ours] == pytest.approx([s for _, s in full], rel=1e-12), words
            for chunk_id, score in ours:
                assert every[chunk_id] == pytest.approx(score, rel=1e-12), (words, chunk_id)
        skipped += bool(pruned.pruning(terms, collection=collection, top_k=10)[1])
    return skipped


def bounds_hold(collection) -> bool:
    """Every term's stored max tf / min dl bound its postings."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT bool_and(t.max_tf >= p.max_tf AND t.min_dl <= p.min_dl) FROM "
            "retrieval_bm25_term t JOIN (SELECT term, max(tf) AS max_tf, min(dl) AS min_dl "
            "FROM retrieval_bm25_posting WHERE collection_id = %s GROUP BY term) AS p "
            "ON p.term = t.term WHERE t.collection_id = %s",
            [collection.pk, collection.pk],
        )
        return cursor.fetchone()[0]


def test_pruned_top_k_equals_exhaustive(zipf):
    collection, rng = zipf
    assert bounds_hold(collection)
    # The pruning is real: most queries leave their frequent words' postings unread.
    assert assert_same_rankings(collection, rng) >= 40


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
    assert assert_same_rankings(collection, rng) >= 40
    top = BM25Retriever().score(Analyzer().terms(VOCABULARY[5]), collection=collection, top_k=1)
    assert Document.objects.get(chunks=top[0][0]).external_id == "d3"


def test_pruning_keeps_filters(zipf):
    collection, rng = zipf
    kept = list(Document.objects.filter(collection=collection).order_by("pk")[:300])
    filters = {"documents": [d.external_id for d in kept]}
    for words in queries(rng, 30):
        query = " ".join(words)
        ours = BM25Retriever().rank(query, collection=collection, filters=filters)
        full = BM25Retriever(prune=False).rank(query, collection=collection, filters=filters)
        assert [s.score for s in ours] == pytest.approx([s.score for s in full], rel=1e-12)
        allowed = {c.pk for d in kept for c in d.chunks.all()}
        assert {s.chunk_id for s in ours} <= allowed
