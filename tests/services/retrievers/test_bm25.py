"""BM25 inside PostgreSQL: scores against bm25s, statistics kept exact, filters, real text."""

from __future__ import annotations

import json
import re

import bm25s
import pytest
import Stemmer
from django.core.management import call_command
from django.db import connection

from retrieval.models import Collection, Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.quality.evaluation import ndcg_at_k
from retrieval.services.retrievers.bm25 import BM25Retriever
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.sparse.stopwords import ENGLISH
from tests.conftest import MINIBEIR, SAMPLE_DOCS

pytestmark = pytest.mark.django_db

DOCS = {
    "cats": "Cats sleep most of the day. A cat purrs.",
    "dogs": "Dogs bark at cats and at the mailman.",
    "birds": "Birds sing at dawn; some birds migrate south for the winter.",
    "mixed": "Cats, dogs and birds: a household of pets that sleep, bark and sing.",
}


def reference(corpus: list[str], k1: float, b: float) -> bm25s.BM25:
    """bm25s with the same analysis: the same stop words, then the same Snowball stemmer."""
    tokens = bm25s.tokenize(
        corpus, stopwords=sorted(ENGLISH), stemmer=Stemmer.Stemmer("english"), show_progress=False
    )
    model = bm25s.BM25(k1=k1, b=b, method="lucene")
    model.index(tokens, show_progress=False)
    return model


def reference_scores(model: bm25s.BM25, query: str) -> list[float]:
    terms = bm25s.tokenize(
        [query],
        stopwords=sorted(ENGLISH),
        stemmer=Stemmer.Stemmer("english"),
        show_progress=False,
        return_ids=False,
    )[0]
    return [float(s) for s in model.get_scores(terms)]


@pytest.fixture
def pets(keyword_settings, retrieval_settings):
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    collection, _ = get_or_create_collection("pets")
    sources = [
        Source.from_text(
            text, external_id=key, metadata={"kind": "mixed" if key == "mixed" else "single"}
        )
        for key, text in DOCS.items()
    ]
    assert ingest(collection, sources).status == "succeeded"
    return collection


def index_state(collection: Collection) -> tuple[dict, dict, tuple]:
    """The term and statistics tables, and what they should be, recomputed from the postings."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT term, df FROM retrieval_bm25_term WHERE collection_id = %s", [collection.pk]
        )
        terms = dict(cursor.fetchall())
        cursor.execute(
            "SELECT term, count(*) FROM retrieval_bm25_posting "
            "WHERE collection_id = %s GROUP BY term",
            [collection.pk],
        )
        recomputed = dict(cursor.fetchall())
        cursor.execute(
            "SELECT chunk_count, total_length FROM retrieval_bm25_stats WHERE collection_id = %s",
            [collection.pk],
        )
        stats = cursor.fetchone()
        cursor.execute(
            "SELECT count(*), coalesce(sum(dl), 0) FROM (SELECT DISTINCT chunk_id, dl "
            "FROM retrieval_bm25_posting WHERE collection_id = %s) AS c",
            [collection.pk],
        )
        expected_stats = cursor.fetchone()
    return terms, recomputed, (stats, expected_stats)


@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.5, 0.75), (1.2, 0.0)])
def test_scores_equal_bm25s(pets, k1, b):
    corpus = [
        f"{Document.objects.get(external_id=key).title}\n{text}" for key, text in DOCS.items()
    ]
    model = reference(corpus, k1, b)
    retriever = BM25Retriever(k1=k1, b=b)
    for query in ("cats that sleep", "bark bark", "birds migrating in winter", "the pets"):
        expected = dict(zip(DOCS, reference_scores(model, query), strict=True))
        results = retriever.retrieve(query, collection=pets, top_k=10)
        got = {r.chunk.document.external_id: r.metadata["raw_score"] for r in results}
        assert set(got) == {key for key, score in expected.items() if score > 0}, query
        for key, score in got.items():
            assert score == pytest.approx(expected[key], rel=1e-5), (query, key)
        assert [r.metadata["raw_score"] for r in results] == sorted(got.values(), reverse=True)
        # The score is the raw one divided by the best: the design's [0, 1].
        best = max(got.values())
        assert [r.score for r in results] == pytest.approx(
            [s / best for s in sorted(got.values(), reverse=True)]
        )


def test_only_positive_scores_and_empty_queries(pets):
    retriever = BM25Retriever()
    assert retriever.retrieve("zebra", collection=pets) == []
    assert retriever.retrieve("the and of", collection=pets) == []  # stop words only
    assert {r.chunk.document.external_id for r in retriever.retrieve("sing", collection=pets)} == {
        "birds",
        "mixed",
    }


def test_filters_apply(pets):
    results = BM25Retriever().retrieve(
        "cats", collection=pets, filters={"metadata": {"kind": "single"}}
    )
    assert {r.chunk.document.external_id for r in results} == {"cats", "dogs"}
    only = BM25Retriever().retrieve("cats", collection=pets, filters={"documents": ["mixed"]})
    assert [r.chunk.document.external_id for r in only] == ["mixed"]


def test_statistics_stay_exact_through_updates_and_deletes(pets):
    terms, recomputed, (stats, expected) = index_state(pets)
    assert terms == recomputed and stats == expected and stats[0] == 4
    # Replace one document's content, delete another: the statistics follow at once.
    ingest(pets, [Source.from_text("Hamsters run on wheels all night.", external_id="cats")])
    Document.objects.get(external_id="dogs").delete()
    terms, recomputed, (stats, expected) = index_state(pets)
    assert terms == recomputed and stats == expected and stats[0] == 3
    assert "hamster" in terms and "bark" in terms  # "bark" is still in "mixed"
    assert "purr" not in terms  # only the old "cats" text had it
    assert terms["bark"] == 1
    before = [
        r.chunk.document.external_id for r in BM25Retriever().retrieve("bark", collection=pets)
    ]
    assert before == ["mixed"]


def test_deleting_a_collection_empties_its_index(pets):
    other, _ = get_or_create_collection("other")
    ingest(other, [Source.from_text("Cats again.", external_id="x")])
    pets.delete()
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT collection_id FROM retrieval_bm25_posting")
        assert cursor.fetchall() == [(other.pk,)]
        cursor.execute("SELECT collection_id FROM retrieval_bm25_stats")
        assert cursor.fetchall() == [(other.pk,)]
        cursor.execute("SELECT DISTINCT collection_id FROM retrieval_bm25_term")
        assert cursor.fetchall() == [(other.pk,)]


@pytest.mark.django_db(transaction=True)
def test_flush_truncates_the_index_with_the_chunks(pets):
    call_command("flush", "--noinput", verbosity=0)  # TRUNCATE, as TransactionTestCase does
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM retrieval_bm25_posting) "
            "+ (SELECT count(*) FROM retrieval_bm25_term) "
            "+ (SELECT count(*) FROM retrieval_bm25_stats)"
        )
        assert cursor.fetchone() == (0,)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="b must be within"):
        BM25Retriever(b=1.5)
    with pytest.raises(ValueError, match="k1 must be"):
        BM25Retriever(k1=-1)
    with pytest.raises(ValueError, match="Unknown stemmer language 'klingon'"):
        Analyzer(language="klingon", stopwords=None)


def sample_corpus() -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """Documents, queries and judgments built from the repository's own texts.

    The tests' BEIR set (40 notes, 14 judged questions) plus every paragraph of the
    sample glossary, FAQ and release notes; the FAQ's questions are queries too,
    judged relevant to the paragraphs that answer them, and each glossary term is a
    query judged relevant to its entry, and so is each note's title (not indexed).
    """
    notes = [json.loads(line) for line in (MINIBEIR / "corpus.jsonl").open()]
    documents = {d["_id"]: d["text"] for d in notes}
    queries = {q["_id"]: q["text"] for q in map(json.loads, (MINIBEIR / "queries.jsonl").open())}
    queries.update({f"title-{d['_id']}": d["title"] for d in notes})
    qrels: dict[str, dict[str, int]] = {f"title-{d['_id']}": {d["_id"]: 1} for d in notes}
    for line in (MINIBEIR / "qrels" / "test.tsv").open().readlines()[1:]:
        qid, did, grade = line.split()
        qrels.setdefault(qid, {})[did] = int(grade)
    for name in ("glossary.txt", "faq.md", "release-notes.md"):
        question = None
        text = (SAMPLE_DOCS / name).read_text()
        for n, paragraph in enumerate(re.split(r"\n\s*\n", text)):
            paragraph = paragraph.strip()
            if paragraph.startswith("### "):
                question = f"{name}-q{n}"
                queries[question] = paragraph[4:]
            elif paragraph.startswith("#"):
                question = None
            elif paragraph:
                key = f"{name}-{n}"
                documents[key] = paragraph
                if question:
                    qrels.setdefault(question, {})[key] = 1
                if name == "glossary.txt" and "\n" in paragraph:
                    queries[f"term-{n}"] = paragraph.split("\n", 1)[0]
                    qrels[f"term-{n}"] = {key: 1}
    return documents, queries, qrels


def test_same_top_10_as_bm25s_on_the_sample_documents(keyword_settings, retrieval_settings):
    """Real text: ~120 paragraphs and ~110 queries, against bm25s with the same analysis."""
    retrieval_settings(
        CHUNKERS={"default": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"}}
    )
    documents, queries, qrels = sample_corpus()
    assert len(documents) > 100 and len(queries) > 100
    collection, _ = get_or_create_collection("samples")
    run = ingest(
        collection, [Source.from_text(text, external_id=key) for key, text in documents.items()]
    )
    assert run.documents_indexed == len(documents)
    titles = dict(
        Document.objects.filter(collection=collection).values_list("external_id", "title")
    )
    ids = list(documents)
    model = reference([f"{titles[i]}\n{documents[i]}" for i in ids], k1=0.9, b=0.4)
    retriever = BM25Retriever(k1=0.9, b=0.4)
    identical, ours_ndcg, theirs_ndcg = 0, [], []
    for query_id, query in queries.items():
        results = retriever.retrieve(query, collection=collection, top_k=10)
        ours = [r.chunk.document.external_id for r in results]
        scores = reference_scores(model, query)
        ranked = sorted(range(len(ids)), key=lambda i: -scores[i])
        theirs = [ids[i] for i in ranked[:10] if scores[i] > 0]
        identical += ours == theirs
        ours_ndcg.append(ndcg_at_k(ours, qrels.get(query_id, {})))
        theirs_ndcg.append(ndcg_at_k(theirs, qrels.get(query_id, {})))
    assert identical >= 0.97 * len(queries), f"{identical} of {len(queries)} identical top-10 lists"
    assert sum(ours_ndcg) / len(queries) == pytest.approx(
        sum(theirs_ndcg) / len(queries), abs=0.002
    )
    assert sum(ours_ndcg) / len(queries) > 0.5  # the judgments mean something


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_sharing_terms_neither_deadlock_nor_drift(pets):
    """Two workers keep replacing their own documents with texts drawn from one shared
    vocabulary: every write succeeds (no deadlock between the term and statistics rows
    they both update) and the statistics still equal what the postings say."""
    import random
    import threading
    import time

    from django.db import connections

    vocabulary = [f"{animal}{n}" for animal in ("cat", "dog", "owl", "eel") for n in range(12)]
    barrier = threading.Barrier(2)
    failures: list[str] = []

    def worker(name: str, seed: int) -> None:
        rng = random.Random(seed)
        try:
            for round_ in range(25):
                sources = [
                    Source.from_text(
                        " ".join(rng.sample(vocabulary, 20)), external_id=f"{name}-{i}"
                    )
                    for i in range(3)
                ]
                barrier.wait(timeout=30)
                run = ingest(pets, sources)
                if run.status != "succeeded":
                    failures.append(f"{name} round {round_}: {run.errors}")
        except Exception as e:  # noqa: BLE001 - reported below, with the worker's name
            failures.append(f"{name}: {e!r}")
            barrier.abort()
        finally:
            connections.close_all()

    def deadlocks() -> int:
        with connection.cursor() as cursor:
            for _ in range(50):  # the workers' sessions flush their statistics as they exit
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
                )
                if cursor.fetchone()[0] == 0:
                    break
                time.sleep(0.1)
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
            )
            return cursor.fetchone()[0]

    deadlocks_before = deadlocks()
    threads = [threading.Thread(target=worker, args=(n, s)) for n, s in (("a", 1), ("b", 2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    # A deadlock would not fail a run (ingestion retries each document on its own), so
    # ask PostgreSQL: its counter is flushed when the workers' sessions end.
    assert deadlocks() == deadlocks_before
    terms, recomputed, (stats, expected) = index_state(pets)
    assert terms == recomputed and stats == expected and stats[0] == 4 + 6


def test_identifiers_also_give_the_words_they_are_made_of():
    words = "Call select_related() on an HTTPEndpoint or getElementById in manage.py"
    assert Analyzer(stopwords="english", language=None, split_identifiers=True).terms(words) == [
        "call", "select_related", "select", "related", "httpendpoint", "http", "endpoint",
        "getelementbyid", "get", "element", "id", "manage", "py",
    ]  # fmt: skip
    # Off by default: an identifier is one term.
    assert Analyzer(language=None).terms("select_related HTTPEndpoint") == [
        "select_related",
        "httpendpoint",
    ]
