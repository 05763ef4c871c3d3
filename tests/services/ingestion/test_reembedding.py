"""Re-embedding a collection into a new space: built beside the old, switched at once."""

from __future__ import annotations

import pytest
from django.db import connection

from retrieval.models import Chunk, IndexRun
from retrieval.services.access import Scope
from retrieval.services.indexes.pgvector import vector_index_name
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.reembedding import reembed
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.services.query.search import search
from retrieval.tasks import reembed_collection
from tests.services.retrievers.test_dense_index_builds import (
    chunk_table_lock_of_another_session,
    index_state,
    running_behind_an_older_transaction,
)

pytestmark = pytest.mark.django_db

# The keyword embedder's three axes, then two more: a 5-dimensional space in which
# "south" and "west" exist, so a query only the new space understands tells them apart.
WIDE = {
    "BACKEND": "retrieval.testing.KeywordEmbedder",
    "OPTIONS": {"keywords": ["north", "east", "up", "south", "west"], "model": "wide"},
}
TEXTS = {
    "n": "North is up.",
    "e": "East rises.",
    "s": "South goes down.",
    "w": "West sets.",
    "u": "Up north.",
    "x": "East east.",
}


@pytest.fixture
def collection(keyword_settings, retrieval_settings):
    retrieval_settings(EMBEDDERS={"wide": WIDE}, EMBED_BATCH_SIZE=1)
    collection = get_or_create_collection("compass")[0]
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    return collection


def dense(query: str, top_k: int = 1) -> list[str]:
    return [
        r.chunk.document.external_id
        for r in search(
            query, collection="compass", retriever="dense", top_k=top_k, scope=Scope.ALL
        )
    ]


def index_definition(collection_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            [vector_index_name(collection_id)],
        )
        return cursor.fetchone()[0]


# Committed writes, as on a worker: the switch's transaction then builds the new index
# itself (a transaction with pending foreign-key checks would defer it to the commit).
@pytest.mark.django_db(transaction=True)
def test_searches_use_the_old_space_until_the_new_one_is_complete(collection):
    old_vectors = {c.pk: list(c.embedding) for c in Chunk.objects.all()}
    seen = []

    def halfway(run: IndexRun) -> None:
        # Mid-way: some chunks have new vectors beside the old, none replaced yet.
        built = Chunk.objects.filter(embedding_next__isnull=False).count()
        seen.append((run.documents_done, built))
        collection.refresh_from_db()
        assert (collection.embedder, collection.dimensions) == ("default", 3)
        assert {c.pk: list(c.embedding) for c in Chunk.objects.all()} == old_vectors
        assert dense("north") in (["n"], ["u"])  # old space answers
        assert "vector(3)" in index_definition(collection.pk)

    run = IndexRun.objects.create(collection=collection, task="reembed_collection")
    reembed(collection, "wide", run=run, on_group=halfway)
    # Groups of four chunks (EMBED_BATCH_SIZE 1 x 4): the hook ran after 4 and after 6.
    assert seen == [(4, 4), (6, 6)]
    assert run.status == IndexRun.Status.SUCCEEDED and run.chunks_written == 6
    collection.refresh_from_db()
    assert (collection.embedder, collection.model_name, collection.dimensions) == (
        "wide",
        "wide",
        5,
    )
    assert "vector(5)" in index_definition(collection.pk)
    assert not Chunk.objects.filter(embedding_next__isnull=False).exists()
    assert all(len(c.embedding) == 5 for c in Chunk.objects.all())
    assert dense("south") == ["s"] and dense("west") == ["w"]


def test_a_document_indexed_during_the_reembedding_is_caught_up(collection):
    def add_one(run: IndexRun) -> None:
        if run.documents_done == 4:  # indexed in the old space, after its group passed
            ingest(collection, [Source.from_text("South by west.", external_id="sw")])

    run = IndexRun.objects.create(collection=collection, task="reembed_collection")
    reembed(collection, "wide", run=run, on_group=add_one)
    assert all(len(c.embedding) == 5 for c in Chunk.objects.all())
    assert dense("south west", top_k=1) == ["sw"]
    # A write prepared in the old space after the switch is refused, not stored.
    collection.embedder, collection.dimensions = "default", 3
    late = ingest(collection, [Source.from_text("North again.", external_id="late")])
    assert late.documents_failed == 1 and "was re-embedded" in late.errors[0]["error"]


def test_reembed_task_and_cancel_keep_the_old_space(collection, retrieval_settings):
    run = enqueue_run(reembed_collection, collection.pk, "wide", collection=collection)
    assert run.status == IndexRun.Status.SUCCEEDED
    assert run.options["from"] == {"embedder": "default", "dimensions": 3}
    retrieval_settings(
        EMBEDDERS={
            "cancelling": {
                "BACKEND": "tests.support.embedders.CancellingEmbedder",
                "OPTIONS": {"cancel_on_call": 2, "keywords": ["a", "b"]},
            }
        }
    )
    cancelled = enqueue_run(reembed_collection, collection.pk, "cancelling", collection=collection)
    assert cancelled.status == IndexRun.Status.CANCELLED
    collection.refresh_from_db()
    assert (collection.embedder, collection.dimensions) == ("wide", 5)
    assert not Chunk.objects.filter(embedding_next__isnull=False).exists()
    unknown = enqueue_run(reembed_collection, collection.pk, "nope", collection=collection)
    assert unknown.status == IndexRun.Status.FAILED and "nope" in unknown.message


@pytest.mark.django_db(transaction=True)
def test_the_new_space_is_indexed_once_an_older_snapshot_that_saw_the_old_vectors_ends(
    collection,
):
    # Another session's transaction took its snapshot before the switch (and holds no
    # lock on the chunks): the 3-dimensional rows the switch replaces are still visible
    # to it. The new index is built after the switch commits, concurrently, so its build
    # waits for that transaction; searches meanwhile scan the new space exactly, and the
    # build then meets the old row versions too (still on disk).
    # Rows as large as real chunks' (a few of them fill a page), so that the switch's
    # updates cannot keep a row's versions on its page (not HOT) and the build reads
    # the old versions themselves.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_chunk SET metadata = jsonb_build_object('padding', "
            "(SELECT string_agg(md5(random()::text || i), '') FROM generate_series(1, 48) i))"
        )
    run = IndexRun.objects.create(collection=collection, task="reembed_collection")
    with running_behind_an_older_transaction(lambda: reembed(collection, "wide", run=run)):
        assert chunk_table_lock_of_another_session() == "ShareUpdateExclusiveLock"
        collection.refresh_from_db()
        assert collection.dimensions == 5
        assert index_state(vector_index_name(collection.pk)) == "invalid"
        assert dense("south") == ["s"]  # the new space, scanned exactly
    run.refresh_from_db()
    assert run.status == IndexRun.Status.SUCCEEDED
    assert "vector(5)" in index_definition(collection.pk)
    assert index_state(vector_index_name(collection.pk)) == "valid"
    assert dense("south") == ["s"]
