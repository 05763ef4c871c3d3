"""The outbox on committed transactions: an engine that is down loses nothing."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from retrieval.models import Chunk, Collection, Document, IndexOperation
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexes import index_for, outbox
from retrieval.services.indexing import Source, ingest
from retrieval.services.scope import Scope
from retrieval.services.search import search
from tests.services.indexes.conftest import BACKENDS, engine_for

TEXTS = {
    "n": "north",
    "ne": "north east",
    "nne": "north north east",
    "e": "east",
    "u": "up",
    "nu": "north up",
}


@pytest.fixture(params=["chroma", "milvus"])
def engine(request, engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, request.param, tmp_path_factory)
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS[request.param], "OPTIONS": engine.options}},
        TASKS_SYNC=True,
    )
    yield engine
    if engine.process is None or engine.process.poll() is not None:
        engine.start()


def exact_ranking(collection: Collection, query: str, top_k: int) -> list[int]:
    """Rank the collection's chunks by cosine similarity in numpy, from PostgreSQL's vectors."""
    from retrieval.services.collections import embedder_for

    vector = np.asarray(embedder_for(collection).embed_query(query), dtype=np.float64)
    rows = list(Chunk.objects.filter(collection=collection).values_list("pk", "embedding"))
    scores = {pk: float(np.dot(vector, np.asarray(e)) / np.linalg.norm(e)) for pk, e in rows}
    return sorted(scores, key=lambda pk: (-round(scores[pk], 5), pk))[:top_k]


@pytest.mark.django_db(transaction=True)
def test_writes_and_deletes_while_the_engine_is_down_are_applied_when_it_is_back(engine):
    collection, _ = get_or_create_collection("compass", index="ext")
    assert collection.external_index
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in list(TEXTS.items())[:3]])
    assert IndexOperation.objects.count() == 0  # drained on commit
    assert index_for(collection).count(collection) == 3

    engine.stop()
    run = ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    assert run.status == "succeeded", run.errors  # ingestion does not wait for the engine
    Document.objects.filter(collection=collection, external_id__in=["n", "u"]).delete()
    pending = IndexOperation.objects.filter(collection_id=collection.pk)
    assert pending.count() >= 2 and pending.exclude(last_error="").exists()
    with pytest.raises(CommandError, match="could not be applied"):
        call_command("retrieval_sync_index", collection="compass", check=True)

    engine.start()
    call_command("retrieval_sync_index", collection="compass", check=True)  # exit 0: in sync
    assert not IndexOperation.objects.exists()
    collection = Collection.objects.get(pk=collection.pk)
    for query in ("north", "east", "north east", "up"):
        found = [
            r.chunk.pk
            for r in search(query, collection=collection, retriever="dense", scope=Scope.ALL)
        ]
        assert found == exact_ranking(collection, query, 10)
    assert len(found) == 4


@pytest.mark.django_db(transaction=True)
def test_check_exits_1_naming_the_counts_and_rebuild_repairs(engine, capsys):
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    index_for(collection).delete(collection, [Chunk.objects.order_by("pk").first().pk])
    with pytest.raises(SystemExit) as exited:
        call_command("retrieval_sync_index", collection="compass", check=True)
    assert exited.value.code == 1
    assert "PostgreSQL holds 6 chunk vectors, the index 5: 1 missing" in capsys.readouterr().err
    call_command("retrieval_sync_index", collection="compass", rebuild=True, check=True)
    assert "In sync" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_a_deleted_collection_s_space_is_dropped(engine):
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    index = index_for(collection)
    space = Collection.objects.get(pk=collection.pk).index_space
    assert space in index._names()
    collection.delete()
    assert not IndexOperation.objects.exists()
    assert space not in index._names()
    assert outbox.pending(collection.pk or 0)["count"] == 0
