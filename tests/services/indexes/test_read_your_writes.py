"""Read-your-writes on every external index: a search never misses what PostgreSQL committed
because the engine has not caught up, and the commands that write apply the outbox before
they exit, or say what waits."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from retrieval.models import Collection, Document, IndexOperation
from retrieval.services.access import Scope
from retrieval.services.indexes import index_for, outbox
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from tests.services.indexes.conftest import BACKENDS, EXTERNAL, engine_for
from tests.support.engines import free_port

TEXTS = {"n": "north", "ne": "north east", "e": "east", "u": "up"}


@pytest.fixture(params=EXTERNAL)
def no_worker(request, engines, tmp_path_factory, keyword_settings, retrieval_settings):
    """Index "ext" on a running engine; work goes to django-q2, whose workers are not running."""
    engine = engine_for(engines, request.param, tmp_path_factory)
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS[request.param], "OPTIONS": engine.options}},
        TASKS_SYNC=False,
    )
    return engine


def dense(query: str, collection, **options) -> list[str]:
    found = search(query, collection=collection, retriever="dense", scope=Scope.ALL, **options)
    return [r.chunk.document.external_id for r in found]


@pytest.mark.django_db(transaction=True)
def test_ingest_with_no_worker_then_search_at_once_finds_the_new_document(no_worker):
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    outbox.drain()  # the engine holds the first four
    ingest(collection, [Source.from_text("north north east", external_id="nne")])
    Document.objects.filter(collection=collection, external_id="ne").delete()
    assert IndexOperation.objects.filter(collection_id=collection.pk).count() == 2  # queued
    assert index_for(collection).count(collection) == 4  # the engine has neither change

    assert dense("north", collection, top_k=2) == ["n", "nne"]
    assert "ne" not in dense("north east", collection)
    assert dense("east", collection, filters={"documents": ["nne", "u"]}) == ["nne", "u"]
    hybrid = search("north", collection=collection, retriever="hybrid", scope=Scope.ALL)
    assert [r.chunk.document.external_id for r in hybrid][:2] == ["n", "nne"]
    batch = [[r.chunk.document.external_id for r in answer] for answer in _batch(collection)]
    assert [names[:2] for names in batch] == [["n", "nne"], ["e", "nne"]]


def _batch(collection):
    from retrieval.services.query.search import search_batch

    return search_batch(
        ["north", "east"], collection=collection, retriever="dense", scope=Scope.ALL
    )


@pytest.mark.django_db(transaction=True)
def test_a_new_collection_s_first_ingest_is_found_before_the_engine_has_a_space(no_worker):
    collection, _ = get_or_create_collection("fresh", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    assert Collection.objects.get(pk=collection.pk).index_space == ""  # nothing drained
    assert dense("north", collection, top_k=2) == ["n", "ne"]


@pytest.mark.django_db(transaction=True)
def test_retrieval_ingest_applies_the_outbox_before_it_exits(no_worker, tmp_path):
    for key, text in TEXTS.items():
        (tmp_path / f"{key}.txt").write_text(text)
    out = StringIO()
    call_command("retrieval_ingest", str(tmp_path), collection="maps", index="ext", stdout=out)
    collection = Collection.objects.get(name="maps")
    assert not IndexOperation.objects.filter(collection_id=collection.pk).exists()
    index = index_for(collection)
    # One transaction wrote the four files' chunks: one operation.
    assert f"Applied 1 index operation to index 'ext' ({type(index).__name__})." in out.getvalue()
    assert index.count(collection) == 4
    assert dense("north", collection, top_k=1) == [f"{tmp_path.name}/n.txt"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["chroma", "milvus"])
def test_retrieval_ingest_says_what_waits_when_the_engine_does_not_answer(
    kind, keyword_settings, retrieval_settings, tmp_path
):
    port = free_port()  # nothing listens there
    options = (
        {"host": "127.0.0.1", "port": port}
        if kind == "chroma"
        else {"uri": f"http://127.0.0.1:{port}"}
    )
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS[kind], "OPTIONS": {**options, "timeout": 1}}},
        TASKS_SYNC=False,
    )
    (tmp_path / "n.txt").write_text("north")
    (tmp_path / "e.txt").write_text("east")
    out, err = StringIO(), StringIO()
    call_command(
        "retrieval_ingest", str(tmp_path), collection="maps", index="ext", stdout=out, stderr=err
    )
    assert "indexed" in out.getvalue()  # the ingestion itself succeeded: exit status 0
    name = BACKENDS[kind].rsplit(".", 1)[1]
    message = err.getvalue()
    assert f"Not applied to index 'ext' ({name}) yet: 1 index operation (" in message
    assert "retrieval_sync_index --collection 'maps'" in message
    collection = Collection.objects.get(name="maps")
    assert IndexOperation.objects.filter(collection_id=collection.pk).count() == 1
