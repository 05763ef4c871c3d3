"""The outbox on committed transactions: an engine that is down loses nothing, and a
search it cannot answer is refused with its reason on every face."""

from __future__ import annotations

import os
import re
import signal
import threading

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils.html import escape
from rest_framework.test import APIClient

from retrieval.exceptions import IndexUnavailableError
from retrieval.models import Chunk, Collection, Document, IndexOperation
from retrieval.services.access import Scope
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexes import index_for, outbox
from retrieval.services.indexing import Source, ingest
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


@pytest.mark.django_db(transaction=True)
def test_a_search_while_the_engine_is_down_is_refused_clearly_on_every_face(
    engine, client, retrieval_settings
):
    retrieval_settings(DEFAULT_RETRIEVER="dense")  # for the tool and the search page
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    user = get_user_model().objects.create_user(username="reader", password="x")
    api = APIClient(raise_request_exception=False)
    api.force_authenticate(user)
    client.force_login(user)
    client.raise_request_exception = False
    engine.stop()
    kind = BACKENDS[engine.kind].rsplit(".", 1)[1]
    named = f"Index 'ext' ({kind}) did not answer the search of collection 'compass'"

    with pytest.raises(IndexUnavailableError, match=re.escape(named)):
        search("north", collection=collection, retriever="dense", scope=Scope.ALL)
    for url, body in (
        ("/api/search/", {"query": "north"}),
        ("/api/search/batch/", {"queries": ["north", "east"]}),
    ):
        answer = api.post(url, {"collection": "compass", "retriever": "dense", **body})
        assert answer.status_code == 503 and named in answer.json()["detail"], answer.content
    call = {"collection": "compass", "name": "retrieve", "arguments": {"query": "north"}}
    assert named in api.post("/api/tools/call/", call, format="json").json()["error"]
    page = client.get(reverse("retrieval:search"), {"collection": "compass", "q": "north"})
    assert page.status_code == 200 and escape(named) in page.content.decode()
    with pytest.raises(CommandError, match=re.escape(named)):
        call_command("retrieval_search", "north", collection="compass", retriever="dense")

    # The hybrid answers from its BM25 leg and names the one that failed.
    hybrid = {"collection": "compass", "query": "north", "retriever": "hybrid"}
    answer = api.post("/api/search/", hybrid)
    assert answer.status_code == 200, answer.content
    results = answer.json()["results"]
    assert results and all(set(r["metadata"]["legs"]) == {"bm25"} for r in results)
    assert named in results[0]["metadata"]["failed_legs"]["dense"]


@pytest.mark.django_db(transaction=True)
def test_a_search_of_an_engine_that_stopped_answering_times_out(engine, retrieval_settings):
    options = {**engine.options, "timeout": 2}
    retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS[engine.kind], "OPTIONS": options}})
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    expected = exact_ranking(collection, "north", 10)

    def dense(query: str) -> list[int]:
        found = search(query, collection=collection, retriever="dense", scope=Scope.ALL)
        return [r.chunk.pk for r in found]

    assert dense("north") == expected  # connected before the engine freezes
    group = os.getpgid(engine.process.pid)
    os.killpg(group, signal.SIGSTOP)  # it keeps its connections and answers nothing
    # Thawed after 45 s if the search hangs: sooner than pymilvus gives up by itself (~70 s).
    thaw = threading.Timer(45, os.killpg, (group, signal.SIGCONT))
    thaw.start()
    try:
        with pytest.raises(IndexUnavailableError, match="did not answer"):
            dense("north")
        options["timeout"] = 1  # a new index instance: it connects while the engine is frozen
        retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS[engine.kind], "OPTIONS": options}})
        with pytest.raises(IndexUnavailableError, match="did not answer"):
            dense("north")
        hybrid = search("north", collection=collection, retriever="hybrid", scope=Scope.ALL)
        assert hybrid and "dense" in hybrid[0].metadata["failed_legs"]
    finally:
        thaw.cancel()
        os.killpg(group, signal.SIGCONT)
    assert dense("north") == expected  # and the next search reconnects
