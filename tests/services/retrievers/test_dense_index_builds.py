"""Building or dropping a collection's HNSW indexes outside a transaction (a worker, a
command, after a commit) is concurrent: ingestion and searches of every collection go on
meanwhile; and an index a failed build left invalid is built again."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import Thread

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction

from retrieval.services.access import Scope
from retrieval.services.indexes.pgvector import PgvectorIndex, vector_index_name
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.search import search
from tests.support.processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = {"n": "North is up.", "e": "East rises.", "u": "Up north."}


@pytest.fixture
def compass(keyword_settings):
    collection = get_or_create_collection("compass")[0]
    run = ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
    assert run.documents_failed == 0
    return collection


def index_state(name: str) -> str:
    """``"valid"``, ``"invalid"`` or ``"missing"``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [name])
        row = cursor.fetchone()
    return "missing" if row is None else "valid" if row[0] else "invalid"


def chunk_table_lock_of_another_session(timeout: float = 30) -> str:
    """Wait until a session other than this one holds a lock on ``retrieval_chunk`` that
    a write conflicts with or not; return its mode."""
    with connection.cursor() as cursor:
        for _ in range(int(timeout / 0.05)):
            cursor.execute(
                "SELECT mode FROM pg_locks WHERE relation = 'retrieval_chunk'::regclass "
                "AND granted AND pid <> pg_backend_pid() "
                "AND mode IN ('ShareLock', 'ShareUpdateExclusiveLock')"
            )
            row = cursor.fetchone()
            if row:
                return row[0]
            time.sleep(0.05)
    return "none seen"


@contextmanager
def running_behind_an_older_transaction(
    work: Callable[[], object], statement: str = "SELECT 1"
) -> Iterator[Thread]:
    """Run ``work`` in a thread while another session's transaction, begun before it with
    ``statement``, is open (a concurrent index build waits for it to end); yield the thread.
    On leaving, the transaction ends and the thread is joined; an exception ``work`` raised
    fails the test."""
    failures = []

    def run() -> None:
        try:
            work()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))
        finally:
            connections.close_all()

    with psycopg.connect(database_url(connection.settings_dict)) as older:
        older.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        older.execute(statement)  # SELECT 1: its snapshot alone, no lock on the chunks
        thread = Thread(target=run)
        thread.start()
        try:
            yield thread
        finally:
            older.execute("ROLLBACK")
            thread.join(60)
    assert not thread.is_alive() and failures == []


@pytest.mark.parametrize("build", ["create", "rebuild"])
def test_ingestion_goes_on_while_an_index_is_built_outside_a_transaction(compass, build):
    name = vector_index_name(compass.pk)
    if build == "create":
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX {name}")

    def build_it() -> None:
        if build == "create":
            PgvectorIndex().ensure_space(compass)
        else:
            call_command("retrieval_sync_index", collection="compass", rebuild=True)

    with running_behind_an_older_transaction(build_it) as builder:
        # A write conflicts with CREATE INDEX's and REINDEX's ShareLock, not with the
        # ShareUpdateExclusiveLock of their CONCURRENTLY forms.
        assert chunk_table_lock_of_another_session() == "ShareUpdateExclusiveLock"
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")
        try:
            run = ingest(compass, [Source.from_text("East east.", external_id="x")])
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        assert run.documents_failed == 0, run.errors
        assert builder.is_alive()  # waiting for the older transaction
        found = search("east", collection="compass", retriever="dense", scope=Scope.ALL)
        assert found[0].chunk.document.external_id in ("e", "x")
    assert index_state(name) == "valid"
    found = search("east", collection="compass", retriever="dense", top_k=2, scope=Scope.ALL)
    assert {r.chunk.document.external_id for r in found} == {"e", "x"}


@pytest.mark.parametrize("in_transaction", [False, True])
def test_an_index_a_failed_build_left_invalid_is_built_again(compass, in_transaction):
    name = vector_index_name(compass.pk)
    # As a concurrent build that failed (or a server that stopped during it) leaves it.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [name]
        )
    assert index_state(name) == "invalid"
    if in_transaction:
        with transaction.atomic():
            PgvectorIndex().ensure_space(compass)
    else:
        PgvectorIndex().ensure_space(compass)
    assert index_state(name) == "valid"


def test_a_failed_concurrent_rebuild_leaves_nothing_behind(compass):
    name = vector_index_name(compass.pk)
    with connection.cursor() as cursor:
        # What a REINDEX CONCURRENTLY that failed leaves: its new copy, invalid.
        cursor.execute(f"CREATE INDEX {name}_ccnew ON retrieval_chunk (id)")
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            [f"{name}_ccnew"],
        )
    assert PgvectorIndex().built_graph_options(compass) == {name: (16, 64)}
    call_command("retrieval_sync_index", collection="compass", rebuild=True)
    assert index_state(f"{name}_ccnew") == "missing"
    assert index_state(name) == "valid"


def another_session_waits_on_a_lock(timeout: float = 30) -> bool:
    with connection.cursor() as cursor:
        for _ in range(int(timeout / 0.05)):
            cursor.execute(
                "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock')"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.05)
    return False


def test_searches_go_on_while_a_deleted_collections_index_is_dropped(compass):
    other = get_or_create_collection("atlas")[0]
    ingest(other, [Source.from_text("North again.", external_id="a")])
    name = vector_index_name(compass.pk)
    # A transaction reading the chunks, older than the delete: the drop waits for it.
    reading = "SELECT count(*) FROM retrieval_chunk"
    with running_behind_an_older_transaction(compass.delete, reading) as deleting:
        assert another_session_waits_on_a_lock()
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")
        try:
            # A plain DROP INDEX would be queued for an exclusive lock on the table, and
            # this search behind it.
            found = search("north", collection="atlas", retriever="dense", scope=Scope.ALL)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        assert [r.chunk.document.external_id for r in found] == ["a"]
        assert deleting.is_alive()
    assert index_state(name) == "missing"
