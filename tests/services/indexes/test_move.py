"""Moving a collection's vectors between indexes (``retrieval_sync_index --move-to``): from
pgvector to an external engine and back, filled from PostgreSQL without embedding again."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from retrieval.checks import check_collection_embedders
from retrieval.models import Collection, IndexOperation
from retrieval.services.access import Scope
from retrieval.services.indexes import index_for
from retrieval.services.indexes.pgvector import vector_index_name
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from tests.services.indexes.conftest import BACKENDS, EXTERNAL, engine_for
from tests.support.engines import free_port

TEXTS = {"n": "north", "ne": "north east", "e": "east", "u": "up", "nu": "north up"}
QUERIES = ("north", "east", "north east", "up")


@pytest.fixture(params=EXTERNAL)
def engine(request, engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, request.param, tmp_path_factory)
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS[request.param], "OPTIONS": engine.options}},
        TASKS_SYNC=True,
    )
    return engine


def answers(collection) -> dict[str, list[tuple[float, str]]]:
    """Each query's (-score, document), best first; equal scores by name (indexes order
    ties differently)."""
    return {
        query: sorted(
            (-round(r.score, 4), r.chunk.document.external_id)
            for r in search(query, collection=collection, retriever="dense", scope=Scope.ALL)
        )
        for query in QUERIES
    }


def has_hnsw(collection) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [vector_index_name(collection.pk)])
        return cursor.fetchone()[0] is not None


@pytest.mark.django_db(transaction=True)
def test_a_collection_moves_from_pgvector_to_an_engine_and_back(engine):
    collection, _ = get_or_create_collection("compass")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    assert has_hnsw(collection)
    before = answers(collection)

    out = StringIO()
    call_command(
        "retrieval_sync_index", collection="compass", move_to="ext", check=True, stdout=out
    )
    collection = Collection.objects.get(pk=collection.pk)
    index = index_for(collection)
    assert (collection.index, collection.external_index) == ("ext", True)
    assert f"Moved 'compass' (ext, {type(index).__name__}): 5 vectors." in out.getvalue()
    assert "In sync" in out.getvalue()
    assert not has_hnsw(collection)  # pgvector's index is dropped; the vectors stay
    assert answers(collection) == before
    assert not [
        m for m in check_collection_embedders(databases=["default"]) if m.id == "retrieval.E016"
    ]

    ingest(collection, [Source.from_text("north north up", external_id="nnu")])  # via the outbox
    assert index.count(collection) == 6 and not IndexOperation.objects.exists()
    space = collection.index_space
    call_command("retrieval_sync_index", collection="compass", move_to="default", stdout=out)
    collection = Collection.objects.get(pk=collection.pk)
    assert (collection.index, collection.external_index) == ("default", False)
    assert has_hnsw(collection)
    assert not IndexOperation.objects.exists()  # the engine dropped the space it held
    assert space not in index._names()
    assert answers(collection)["north"][:2] == [(-1.0, "n"), (-0.8944, "nnu")]


@pytest.mark.django_db(transaction=True)
def test_while_the_engine_cannot_take_the_move_searches_rank_in_postgresql(
    keyword_settings, retrieval_settings
):
    down = {"uri": f"http://127.0.0.1:{free_port()}", "timeout": 1}
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS["milvus"], "OPTIONS": down}}, TASKS_SYNC=True
    )
    collection, _ = get_or_create_collection("compass")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    before = answers(collection)
    with pytest.raises(CommandError, match="its rebuild there has not run"):
        call_command("retrieval_sync_index", collection="compass", move_to="ext")
    collection = Collection.objects.get(pk=collection.pk)
    assert collection.index == "ext" and has_hnsw(collection)  # kept until the rebuild lands
    assert IndexOperation.objects.filter(kind="rebuild").count() == 1
    assert answers(collection) == before  # ranked by pgvector meanwhile
    ingest(collection, [Source.from_text("north north up", external_id="nnu")])
    assert answers(collection)["north"][:2] == [(-1.0, "n"), (-0.8944, "nnu")]
    with pytest.raises(CommandError, match="Unknown index 'nope'"):
        call_command("retrieval_sync_index", collection="compass", move_to="nope")
