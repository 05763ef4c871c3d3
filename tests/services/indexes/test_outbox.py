"""The outbox on committed transactions: an engine that is down, or killed mid-drain, loses
nothing, and a search it cannot answer is refused with its reason on every face."""

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
from retrieval.services.indexes import index_for, outbox
from retrieval.services.indexes.chroma import ChromaIndex
from retrieval.services.indexes.milvus import MilvusIndex
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from tests.services.indexes.conftest import BACKENDS, EXTERNAL, engine_for
from tests.services.query.test_search_deadline import (
    DEADLINE,
    MARGIN,
    PASSED,
    search_within,
    unavailable,
    within,
)
from tests.support.engines import SlowProxy, free_port

TEXTS = {
    "n": "north",
    "ne": "north east",
    "nne": "north north east",
    "e": "east",
    "u": "up",
    "nu": "north up",
}


@pytest.fixture(params=EXTERNAL)
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
    from retrieval.services.ingestion.collections import embedder_for

    vector = np.asarray(embedder_for(collection).embed_query(query), dtype=np.float64)
    rows = list(Chunk.objects.filter(collection=collection).values_list("pk", "embedding"))
    scores = {pk: float(np.dot(vector, np.asarray(e)) / np.linalg.norm(e)) for pk, e in rows}
    return sorted(scores, key=lambda pk: (-round(scores[pk], 5), pk))[:top_k]


def exact_scores(collection: Collection, query: str) -> list[tuple[float, int]]:
    """(-similarity rounded, chunk id) of every chunk, best first, from PostgreSQL's vectors."""
    from retrieval.services.ingestion.collections import embedder_for

    vector = np.asarray(embedder_for(collection).embed_query(query), dtype=np.float64)
    rows = Chunk.objects.filter(collection=collection).values_list("pk", "embedding")
    return sorted(
        (-round(float(np.dot(vector, np.asarray(e)) / np.linalg.norm(e)), 4), pk) for pk, e in rows
    )


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


class KilledMidDrain:
    """Kills its engine with SIGKILL while the drain writes its second group of vectors:
    the server dies at once, whatever it had acknowledged or not yet flushed."""

    def __init__(self, *, kill_group: int, **options) -> None:
        super().__init__(**options)
        self.kill_group, self.writes = kill_group, 0

    def _upsert(self, name, collection_id, rows):
        self.writes += 1
        if self.writes == 2:
            os.killpg(self.kill_group, signal.SIGKILL)
        return super()._upsert(name, collection_id, rows)


class KilledMidDrainMilvusIndex(KilledMidDrain, MilvusIndex):
    pass


class KilledMidDrainChromaIndex(KilledMidDrain, ChromaIndex):
    pass


@pytest.mark.django_db(transaction=True)
def test_an_engine_killed_mid_drain_loses_nothing(engine, retrieval_settings, monkeypatch):
    monkeypatch.setattr(outbox, "BATCH", 3)  # three documents' operations a group
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text("north", external_id="first")])  # drained: a space
    killing = "Chroma" if engine.kind == "chroma" else "Milvus"
    options = {**engine.options, "kill_group": engine.process.pid, "timeout": 3}
    retrieval_settings(
        INDEXES={
            "ext": {"BACKEND": f"{__name__}.KilledMidDrain{killing}Index", "OPTIONS": options}
        },
        TASKS_SYNC=False,  # nothing drains until this test does
    )
    words = ["north", "east", "up"]
    for i in range(9):  # nine transactions, nine operations: three groups
        text = " ".join(words[j % 3] for j in range(i, i + 1 + i % 3))
        ingest(collection, [Source.from_text(text, external_id=f"d{i}")])
    Document.objects.filter(collection=collection, external_id__in=["d0", "d4"]).delete()
    assert IndexOperation.objects.count() == 10

    result = outbox.drain()  # the first group lands, the server dies in the second
    # The drain leaves the collection at its failure: the last four wait, untried.
    assert (result.applied, result.failed) == (3, 3), result.errors
    engine.process.wait()
    assert IndexOperation.objects.count() == 7
    with pytest.raises(IndexUnavailableError):
        search("north", collection=collection, retriever="dense", scope=Scope.ALL)

    engine.start()  # on the same data, after a SIGKILL
    # A restarted server loads its collections again before it searches: give it time.
    options = {**engine.options, "timeout": 60}
    retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS[engine.kind], "OPTIONS": options}})
    collection = Collection.objects.get(pk=collection.pk)
    assert Chunk.objects.filter(collection=collection).count() == 8

    def every_chunk_scored_exactly() -> None:
        for query in ("north", "east", "up", "north east"):
            found = search(query, collection=collection, retriever="dense", scope=Scope.ALL)
            scored = sorted((-round(r.score, 4), r.chunk.pk) for r in found)
            assert scored == exact_scores(collection, query), query

    every_chunk_scored_exactly()  # before the outbox catches up: PostgreSQL's answer
    call_command("retrieval_sync_index", collection="compass", check=True)  # exit 0: in sync
    assert not IndexOperation.objects.exists()
    every_chunk_scored_exactly()


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
    assert page.status_code == 503 and escape(named) in page.content.decode()
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


class CountingChromaIndex(ChromaIndex):
    """A Chroma index that counts the drain's attempts to reach its engine."""

    attempts = 0

    def ensure_space(self, collection):
        CountingChromaIndex.attempts += 1
        return super().ensure_space(collection)


@pytest.mark.django_db(transaction=True)
def test_a_drain_tries_a_failing_collection_once_whatever_its_pending_operations(
    keyword_settings, retrieval_settings
):
    down = {"host": "127.0.0.1", "port": free_port(), "timeout": 1}  # nothing listens there
    backend = f"{__name__}.CountingChromaIndex"
    retrieval_settings(INDEXES={"ext": {"BACKEND": backend, "OPTIONS": down}}, TASKS_SYNC=False)
    collection, _ = get_or_create_collection("compass", index="ext")
    for key in ("n", "e", "u"):  # three transactions: three pending operations
        ingest(collection, [Source.from_text(TEXTS[key], external_id=key)])
    assert IndexOperation.objects.filter(collection_id=collection.pk).count() == 3
    CountingChromaIndex.attempts = 0

    result = outbox.drain(include_waiting=True)  # as retrieval_sync_index drains

    assert CountingChromaIndex.attempts == 1
    assert (result.applied, result.failed, len(result.errors)) == (0, 3, 1)
    attempts = IndexOperation.objects.values_list("attempts", flat=True)
    assert sorted(attempts) == [1, 1, 1]  # so each waits the first backoff (2 s), not 2**3


def compass_on(retrieval_settings, backend: str, options: dict, **settings):
    """Index TEXTS in collection "compass" on index "ext" (``backend`` with ``options``);
    return "north"'s exact ranking and a dense search of "north" (its chunk ids)."""
    retrieval_settings(INDEXES={"ext": {"BACKEND": backend, "OPTIONS": options}}, **settings)
    collection, _ = get_or_create_collection("compass", index="ext")
    ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])

    def dense() -> list[int]:
        found = search("north", collection=collection, retriever="dense", scope=Scope.ALL)
        return [r.chunk.pk for r in found]

    return exact_ranking(collection, "north", 10), dense


@pytest.mark.django_db(transaction=True)
def test_a_frozen_engine_ends_the_search_at_the_searchs_deadline(engine, retrieval_settings):
    # The index's own timeout would hold each search 30 s; the search's deadline ends it.
    options = {**engine.options, "timeout": 30}
    expected, dense = compass_on(
        retrieval_settings, BACKENDS[engine.kind], options, SEARCH_DEADLINE=DEADLINE
    )
    assert dense() == expected  # connected (and the space loaded) before the engine freezes
    group = os.getpgid(engine.process.pid)
    os.killpg(group, signal.SIGSTOP)
    thaw = threading.Timer(45, os.killpg, (group, signal.SIGCONT))
    thaw.start()
    try:
        # The search's request, then (the failure closed the connection) connecting again.
        for _ in range(2):
            failure = within(DEADLINE + MARGIN, dense)
            assert unavailable(failure, IndexUnavailableError, PASSED), failure
        hybrid = search_within(Collection.objects.get(name="compass"), retriever="hybrid")
        assert hybrid and PASSED in hybrid[0].metadata["failed_legs"]["dense"]
    finally:
        thaw.cancel()
        os.killpg(group, signal.SIGCONT)
    assert dense() == expected


@pytest.mark.django_db(transaction=True)
def test_a_slow_engines_requests_share_its_timeout(
    engines, tmp_path_factory, keyword_settings, retrieval_settings
):
    # A Chroma search is two requests (the space, then the query): each answers within the
    # index's timeout, both do not, and the search fails after the timeout, not the sum.
    engine = engine_for(engines, "chroma", tmp_path_factory)
    with SlowProxy(engine.port) as proxy:
        options = {"host": "127.0.0.1", "port": proxy.port, "timeout": 1.2}
        expected, dense = compass_on(
            retrieval_settings, BACKENDS["chroma"], options, TASKS_SYNC=True
        )
        assert dense() == expected  # connected
        proxy.delay = 0.8
        failure = within(1.2 + MARGIN, dense)
        reason = "no time left: the timeout of index 'ext' (1.2 s) has passed"
        assert unavailable(failure, IndexUnavailableError, reason), failure
        proxy.delay = 0
        assert dense() == expected
