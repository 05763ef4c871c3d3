"""What a Milvus server does that Milvus Lite hides: consistency below Strong, a real HNSW
index, the partition key, the server's version (the 2.3.5 standalone server, started once
per session on 127.0.0.1)."""

from __future__ import annotations

import pytest

from retrieval.models import Chunk, Collection, Document
from retrieval.services.indexes import index_for, outbox, sync
from retrieval.services.indexes.milvus import MilvusIndex, supported_server
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from tests.services.indexes.conftest import BACKENDS, engine_for
from tests.support.engines import free_port

pytestmark = pytest.mark.django_db
NORTH = [1.0, 0.0, 0.0]


@pytest.fixture
def server(engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, "milvus-server", tmp_path_factory)
    retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS["milvus"], "OPTIONS": engine.options}})
    return engine


def filled(name: str, count: int) -> Collection:
    """Collection ``name`` of ``count`` one-chunk documents near north, drained to the server."""
    collection, _ = get_or_create_collection(name, index="ext")
    texts = {f"d{i}": "north " * (i % 5 + 1) + "east " * (i % 7) for i in range(count)}
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in texts.items()])
    assert outbox.drain().failed == 0
    return Collection.objects.get(pk=collection.pk)


def test_no_deleted_chunk_is_returned_once_the_outbox_has_drained(server):
    """Searches read at Bounded consistency, which may not see a delete yet: the drain reads
    its deletes back at Strong before forgetting them, so the engine's own answer (not
    re-checked in PostgreSQL here) never holds a deleted chunk once the outbox is empty."""
    collection = filled("compass", 40)
    index = index_for(collection)
    assert index.consistency_level == "Bounded"
    name = collection.index_space
    for round_ in range(4):
        doomed = list(
            Document.objects.filter(collection=collection).order_by("pk")[round_ * 5 :][:5]
        )
        gone = set(Chunk.objects.filter(document__in=doomed).values_list("pk", flat=True))
        Document.objects.filter(pk__in=[d.pk for d in doomed]).delete()
        assert outbox.drain().failed == 0
        (hits,) = index._search_many(name, collection.pk, [NORTH], 100, [], {})
        assert not gone & {chunk_id for chunk_id, _ in hits}, round_
        assert not gone & index.ids(collection)
    assert not sync.compare(collection)


def test_written_chunks_are_searchable_once_the_outbox_has_drained(server):
    collection = filled("compass", 5)
    index = index_for(collection)
    for round_ in range(3):
        run = ingest(collection, [Source.from_text("north", external_id=f"new{round_}")])
        assert run.status == "succeeded"
        new = Chunk.objects.get(document__external_id=f"new{round_}").pk
        assert outbox.drain().failed == 0
        (hits,) = index._search_many(collection.index_space, collection.pk, [NORTH], 50, [], {})
        assert new in {chunk_id for chunk_id, _ in hits}, round_


def test_a_space_is_one_partition_indexed_by_hnsw_with_the_options_parameters(
    server, retrieval_settings
):
    options = {**server.options, "index_params": {"M": 8, "efConstruction": 40}, "ef": 32}
    retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS["milvus"], "OPTIONS": options}})
    collection = filled("compass", 30)
    sync.rebuild(collection)  # waits until the server has indexed the new space
    collection.refresh_from_db()
    index = index_for(collection)
    client, name = index.client, collection.index_space
    described = client.describe_index(name, "vector")
    assert described["index_type"] == "HNSW" and described["metric_type"] == "COSINE"
    assert (described["M"], described["efConstruction"]) == ("8", "40")
    assert described["indexed_rows"] == described["total_rows"] == 30
    layout = client.describe_collection(name)
    assert layout["num_partitions"] == 1
    assert layout["consistency_level_name"] == "Bounded"
    key = [f for f in layout["fields"] if f.get("is_partition_key")]
    assert [f["name"] for f in key] == ["collection_id"]
    # Every chunk is in the retrieval collection's partition, written by upsert.
    assert index.count(collection) == 30
    ranked = index.rank(NORTH, collection=collection, top_k=30)
    assert len(ranked) == 30
    assert len(index.rank(NORTH, collection=collection, top_k=5, ef_search=200)) == 5


def test_check_server_names_the_version_problem_or_the_unreachable_server(server):
    index = MilvusIndex(**server.options)
    index.alias = "ext"
    assert index.server_version().startswith("v2.3.5")
    assert index.check_server() == []
    down = MilvusIndex(uri=f"http://127.0.0.1:{free_port()}", timeout=1)
    down.alias = "gone"
    (message,) = down.check_server()
    assert message.id == "retrieval.W021"
    assert "cannot reach the Milvus server at 'http://127.0.0.1:" in message.msg
    assert [
        supported_server(v) for v in ("v2.3.5-lite", "v2.4.0", "v2.6.3", "milvus_lite-3.2.2")
    ] == [True] * 4
    assert [supported_server(v) for v in ("v2.3.4", "v2.2.16", "2.1.0", "unknown")] == [False] * 4


def test_manage_py_check_with_a_database_asks_the_servers(server, retrieval_settings):
    from retrieval.checks import check_index_servers

    assert check_index_servers(databases=None) == []  # never without --database
    assert check_index_servers(databases=["default"]) == []
    retrieval_settings(
        INDEXES={
            "ext": {
                "BACKEND": BACKENDS["milvus"],
                "OPTIONS": {"uri": f"http://127.0.0.1:{free_port()}", "timeout": 1},
            },
            "chroma": {
                "BACKEND": BACKENDS["chroma"],
                "OPTIONS": {"host": "127.0.0.1", "port": free_port(), "timeout": 1},
            },
        }
    )
    assert sorted(m.id for m in check_index_servers(databases=["default"])) == [
        "retrieval.W020",
        "retrieval.W021",
    ]
