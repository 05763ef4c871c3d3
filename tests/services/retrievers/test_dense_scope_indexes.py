"""Scope indexes: a declared scope's own HNSW graph, walked by searches the scope implies
(a reader's access token, metadata containing the scope's), and kept with the
collection's space."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from retrieval.models import Chunk, Collection, Document
from retrieval.services.access import Scope
from retrieval.services.core.filters import Filters, ReaderScope
from retrieval.services.indexes.pgvector import PgvectorIndex, scope_index_name, vector_index_name
from retrieval.services.indexes.pgvector.planner import SCOPE_GRAPH_WIDENING
from retrieval.services.indexes.scopes import checked_scope, json_contains, states_scope
from retrieval.services.retrievers.dense import PgvectorRetriever

from .test_dense import _fill, _new_collection
from .test_dense_scoped import ef_search_set, exact_found

pytestmark = pytest.mark.django_db

TAGGED = {"metadata": {"tag": "rare"}}


def index_exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [name])
        return cursor.fetchone()[0] is not None


def fill_documents(collection, accesses: list[list[str] | None], per_document: int, seed: int):
    """One document per entry of ``accesses`` (its host visibility), each with
    ``per_document`` chunks of random unit vectors; return the vectors and the chunks'
    documents' accesses, in chunk order."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(accesses) * per_document, collection.dimensions))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    chunks = []
    for d, access in enumerate(accesses):
        document = Document.objects.create(
            collection=collection, external_id=f"d{d}", content="x", access=access
        )
        for i in range(per_document):
            n = d * per_document + i
            chunks.append(
                Chunk(
                    collection=collection,
                    document=document,
                    index=n,
                    content="x",
                    start=0,
                    end=1,
                    embedding=vectors[n],
                )
            )
    Chunk.objects.bulk_create(chunks, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE retrieval_chunk")
    return vectors, [access for access in accesses for _ in range(per_document)]


def test_a_metadata_scope_index_is_walked_by_the_filters_that_contain_its_scope():
    collection = _new_collection("scope-meta", 8)
    index = PgvectorIndex()
    name = index.add_scope_index(collection, TAGGED)  # before the chunks, as ensure_space
    vectors = _fill(collection, 4000, rare_every=10, seed=21)  # 400 tagged
    assert name == scope_index_name(collection.pk, TAGGED)
    assert index_exists(name)
    # A walk of ef_search 40 visits fewer than the scope's 400: the scope's graph is walked.
    retriever = PgvectorRetriever(exact_scan_limit=50, ef_search=40)
    options = {"collection": collection, "top_k": 10, "filters": {"metadata": {"tag": "rare"}}}
    assert name in retriever.explain(vectors[3], **options)
    found = retriever.rank_vector(vectors[3], **options)
    assert exact_found(collection, vectors, np.arange(0, 4000, 10), vectors[3], found) >= 9
    # A filter inside the scope is ranked within it, the rest of the filter applied.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_chunk SET metadata = metadata || '{\"half\": 1}' "
            "WHERE collection_id = %s AND index %% 80 = 0",
            [collection.pk],
        )
    narrower = {**options, "filters": {"metadata": {"tag": "rare", "half": 1}}}
    found = retriever.rank_vector(vectors[3], **narrower)
    assert exact_found(collection, vectors, np.arange(0, 4000, 80), vectors[3], found) == 10
    assert len(found) == 10
    # One the scope does not contain is planned as before.
    other = {**options, "filters": {"metadata": {"tag": "common"}}}
    assert name not in retriever.explain(vectors[3], **other)


def test_a_declared_scopes_own_graph_is_walked_with_a_wider_list():
    collection = _new_collection("scope-wider", 8)
    PgvectorIndex().add_scope_index(collection, TAGGED)
    vectors = _fill(collection, 4000, rare_every=10, seed=24)  # 400 tagged
    retriever = PgvectorRetriever(exact_scan_limit=50, ef_search=40)
    with CaptureQueriesContext(connection) as captured:
        found = retriever.rank_vector(vectors[2], collection=collection, top_k=10, filters=TAGGED)
    # The scope's graph, walked whole: no estimate, its list wider than the collection's.
    assert ef_search_set(captured) == SCOPE_GRAPH_WIDENING * 40
    assert exact_found(collection, vectors, np.arange(0, 4000, 10), vectors[2], found) >= 9


def test_a_declared_scope_is_walked_whatever_its_size_and_a_short_answer_redone_exactly():
    collection = _new_collection("scope-small", 8)
    name = PgvectorIndex().add_scope_index(collection, TAGGED)
    vectors = _fill(collection, 2000, rare_every=400, seed=22)  # 5 tagged
    retriever = PgvectorRetriever(exact_scan_limit=1000)
    options = {"collection": collection, "top_k": 10, "filters": TAGGED}
    assert name in retriever.explain(vectors[1], **options)
    found = retriever.rank_vector(vectors[1], **options)
    ids = dict(collection.chunks.values_list("index", "pk"))
    assert sorted(f.chunk_id for f in found) == sorted(ids[i] for i in range(0, 2000, 400))


def test_a_readers_indexed_token_is_ranked_apart_from_the_others_and_merged():
    collection = _new_collection("scope-access", 8)
    staff, editors = Group.objects.create(name="staff"), Group.objects.create(name="editors")
    reader = get_user_model().objects.create(username="reader")
    reader.groups.set([staff, editors])
    staff_token, editors_token = f"group:{staff.pk}", f"group:{editors.pk}"
    accesses = [[staff_token]] * 30 + [[staff_token, editors_token]] * 10
    accesses += [[editors_token]] * 10 + [["group:0"]] * 300 + [None] * 10
    name = PgvectorIndex().add_scope_index(collection, {"access": staff_token})
    vectors, chunk_access = fill_documents(collection, accesses, per_document=10, seed=23)
    filters = Scope.for_user(reader).filters()
    retriever = PgvectorRetriever(exact_scan_limit=50)
    options = {"collection": collection, "top_k": 10, "filters": filters}
    # Two parts in one statement: the staff token's graph, and the reader's other tokens
    # together (an exact scan here, ordered outside its subquery).
    assert len(filters.reader.tokens) == 5  # public, signed-in, user, two groups
    plan = retriever.explain(vectors[0], **options)
    assert "Append" in plan and plan.count(name) == 1 and "Subquery Scan on allowed" in plan
    visible = np.array(
        [i for i, access in enumerate(chunk_access) if access is None or "group:0" not in access]
    )
    for query in (vectors[5], vectors[450], vectors[3005]):
        found = retriever.rank_vector(query, **options)
        assert len({f.chunk_id for f in found}) == 10  # merged: no chunk twice
        assert exact_found(collection, vectors, visible, query, found) == 10
        assert [f.score for f in found] == sorted((f.score for f in found), reverse=True)


def test_scope_indexes_follow_the_collections_space():
    collection = _new_collection("scope-life", 8)
    _fill(collection, 300, rare_every=3, seed=24)
    index = PgvectorIndex()
    name = index.add_scope_index(collection, TAGGED)
    assert index.add_scope_index(collection, {"metadata": {"tag": "rare"}}) == name
    collection.refresh_from_db()
    assert collection.scope_indexes == [TAGGED]
    with connection.cursor() as cursor:
        # The chunks' deferred checks, which a CREATE INDEX in their transaction waits for.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    index.drop_space(collection.pk)
    assert not index_exists(name) and not index_exists(vector_index_name(collection.pk))
    index.rebuild(collection)  # creates what is missing, the declared scopes' too
    assert index_exists(name) and index_exists(vector_index_name(collection.pk))
    assert index.remove_scope_index(collection, TAGGED)
    assert not index_exists(name) and index_exists(vector_index_name(collection.pk))
    assert not index.remove_scope_index(collection, TAGGED)
    collection.refresh_from_db()
    assert collection.scope_indexes == []


@pytest.mark.parametrize(
    "scope",
    [{}, {"access": ""}, {"metadata": {}}, {"metadata": [1]}, {"team": "x"}, {"access": "a\x00"}],
)
def test_a_malformed_scope_is_refused(scope):
    with pytest.raises(ValueError):
        checked_scope(scope)


def test_the_command_builds_lists_and_removes_scope_indexes(capsys):
    collection = _new_collection("scope-cmd", 8)
    call_command(
        "retrieval_scope_index", "--collection", "scope-cmd", "--metadata", '{"tag": "rare"}'
    )
    call_command("retrieval_scope_index", "--collection", "scope-cmd", "--access", "group:3")
    assert index_exists(scope_index_name(collection.pk, {"access": "group:3"}))
    call_command("retrieval_scope_index", "--collection", "scope-cmd")
    out = capsys.readouterr().out
    assert scope_index_name(collection.pk, TAGGED) in out
    assert '{"access": "group:3"}' in out.splitlines()[-1]
    call_command(
        "retrieval_scope_index", "--collection", "scope-cmd", "--access", "group:3", "--remove"
    )
    assert not index_exists(scope_index_name(collection.pk, {"access": "group:3"}))
    for bad in (["--metadata", "{not json"], ["--metadata", "[]"], ["--access", "x", "--remove"]):
        with pytest.raises(CommandError):
            call_command("retrieval_scope_index", "--collection", "scope-cmd", *bad)
    with pytest.raises(CommandError, match="No collection"):
        call_command("retrieval_scope_index", "--collection", "nope", "--access", "x")


def test_the_command_refuses_a_collection_in_an_external_index(retrieval_settings):
    # A Chroma server nobody runs: the command refuses before any connection.
    retrieval_settings(
        INDEXES={
            "far": {
                "BACKEND": "retrieval.services.indexes.chroma.ChromaIndex",
                "OPTIONS": {"host": "127.0.0.1", "port": 9},
            }
        }
    )
    collection = Collection.objects.create(
        name="scope-far", slug="scope-far", embedder="default", dimensions=8, index="far"
    )
    with pytest.raises(CommandError, match="scope indexes are pgvector's"):
        call_command("retrieval_scope_index", "--collection", "scope-far", "--access", "g")
    collection.refresh_from_db()
    assert collection.scope_indexes == []


CONTAINMENT = [
    {},
    {"tag": "rare"},
    {"tag": "rare", "half": 1},
    {"tag": ["rare"]},
    {"tag": ["rare", "common"]},
    {"tag": [["rare"]]},
    {"tag": {"rare": True}},
    {"half": 1.0},
    {"half": True},
    {"half": "1"},
    {"half": None},
    {"tags": ["s1%", "s10%"], "team": {"name": "docs", "ids": [1, 2]}},
    {"tags": ["s10%"]},
    {"team": {"ids": [2]}},
    {"team": {"ids": 2}},
]


def test_json_contains_is_postgresqls_containment():
    pairs = [(a, b) for a in CONTAINMENT for b in CONTAINMENT]
    with connection.cursor() as cursor:
        for outer, inner in pairs:
            cursor.execute("SELECT %s::jsonb @> %s::jsonb", [json.dumps(outer), json.dumps(inner)])
            assert json_contains(outer, inner) is cursor.fetchone()[0], (outer, inner)


def test_a_re_embedding_builds_the_scope_indexes_again_in_the_new_space(
    django_capture_on_commit_callbacks,
):
    collection = _new_collection("scope-swap", 8)
    index = PgvectorIndex()
    name = index.add_scope_index(collection, TAGGED)
    collection.dimensions = 4
    collection.save(update_fields=["dimensions"])
    with django_capture_on_commit_callbacks(execute=True):
        index.swap_space(collection)
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        definition = cursor.fetchone()[0]
    assert "vector(4)" in definition and "vector_dims(embedding) = 4" in definition


def test_the_admin_collection_page_names_the_scope_indexes(admin_client):
    collection = _new_collection("scope-admin", 8)
    PgvectorIndex().add_scope_index(collection, {"access": "group:3"})
    PgvectorIndex().add_scope_index(collection, TAGGED)
    page = admin_client.get(reverse("admin:retrieval_collection_change", args=[collection.pk]))
    body = page.content.decode()
    assert "scope indexes: group:3, {&quot;tag&quot;: &quot;rare&quot;}" in body, body[:3000]


def test_scope_values_with_quotes_and_percent_signs_are_written_out_safely():
    collection = _new_collection("scope-quoted", 8)
    odd = "50% o'clock"
    index = PgvectorIndex()
    by_metadata = index.add_scope_index(collection, {"metadata": {"tag": odd}})
    by_token = index.add_scope_index(collection, {"access": f"team:{odd}"})
    accesses = [[f"team:{odd}"]] * 40 + [["group:0"]] * 360
    vectors, _ = fill_documents(collection, accesses, per_document=10, seed=26)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE retrieval_chunk SET metadata = jsonb_build_object('tag', %s::text) "
            "WHERE collection_id = %s AND index %% 10 = 0",
            [odd, collection.pk],
        )
        cursor.execute(
            "UPDATE retrieval_chunk SET metadata = metadata || '{\"half\": 1}' "
            "WHERE collection_id = %s AND index %% 20 = 0",
            [collection.pk],
        )
        cursor.execute("ANALYZE retrieval_chunk")
    retriever = PgvectorRetriever(exact_scan_limit=50, ef_search=40)
    cases = [
        ({"metadata": {"tag": odd}}, by_metadata, np.arange(0, 4000, 10)),
        # Planned by its estimate, the scope's condition written out either way.
        ({"metadata": {"tag": odd, "half": 1}}, None, np.arange(0, 4000, 20)),
        (
            Filters(
                documents_within=Document.objects.all(),
                reader=ReaderScope(tokens=("public", f"team:{odd}")),
            ),
            by_token,
            np.arange(0, 400),
        ),
    ]
    for filters, name, rows in cases:
        options = {"collection": collection, "top_k": 10, "filters": filters}
        assert name is None or name in retriever.explain(vectors[2], **options)
        found = retriever.rank_vector(vectors[2], **options)
        assert exact_found(collection, vectors, rows, vectors[2], found) >= 9


def test_a_filter_states_a_scope_only_in_the_same_json():
    assert states_scope(Filters(metadata={"b": 1, "a": [2]}), {"metadata": {"a": [2], "b": 1}})
    # Equal in Python, not in jsonb (true is no 1): the scope's condition is written out.
    assert not states_scope(Filters(metadata={"x": [True, 1]}), {"metadata": {"x": [1, 1]}})
    assert not states_scope(Filters(metadata={"x": 1}), {"access": "x"})


def test_a_wide_rest_of_a_readers_tokens_walks_the_collections_graph_beside_the_scopes():
    collection = _new_collection("scope-both-walk", 8)
    team = Group.objects.create(name="team")
    reader = get_user_model().objects.create(username="walker")
    reader.groups.set([team])
    token = f"group:{team.pk}"
    name = PgvectorIndex().add_scope_index(collection, {"access": token})
    accesses = [[token]] * 40 + [None] * 200 + [["group:0"]] * 160  # 400, 2,000 public
    vectors, chunk_access = fill_documents(collection, accesses, per_document=10, seed=27)
    retriever = PgvectorRetriever(exact_scan_limit=50)
    options = {"collection": collection, "top_k": 10, "filters": Scope.for_user(reader).filters()}
    plan = retriever.explain(vectors[0], **options)
    # Both parts walk: the team's graph and, for the public half, the collection's.
    assert plan.count(name) == 1 and vector_index_name(collection.pk) + " " in plan, plan
    assert "Subquery Scan" not in plan
    visible = np.array([i for i, a in enumerate(chunk_access) if a is None or token in a])
    for query in (vectors[7], vectors[1234], vectors[3500]):
        found = retriever.rank_vector(query, **options)
        assert exact_found(collection, vectors, visible, query, found) >= 9


def stored_reloptions(name: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [name])
        return sorted(cursor.fetchone()[0] or [])


def test_an_index_builds_its_graphs_with_its_own_construction_options():
    collection = _new_collection("graph-options", 8)  # the default index: pgvector's defaults
    assert stored_reloptions(vector_index_name(collection.pk)) == ["ef_construction=64", "m=16"]
    wide = PgvectorIndex(m=8, ef_construction=100)
    scope = wide.add_scope_index(collection, TAGGED)
    assert stored_reloptions(scope) == ["ef_construction=100", "m=8"]
    assert stored_reloptions(vector_index_name(collection.pk)) == ["ef_construction=64", "m=16"]

    vectors = _fill(collection, 300, rare_every=3, seed=5)
    wide.rebuild(collection)  # the graphs built before get the index's options too
    assert stored_reloptions(vector_index_name(collection.pk)) == ["ef_construction=100", "m=8"]
    assert stored_reloptions(scope) == ["ef_construction=100", "m=8"]
    found = wide.rank(vectors[7], collection=collection, top_k=1)
    assert found[0].score == pytest.approx(1.0, abs=1e-5)


def test_graphs_built_with_other_options_than_configured_are_a_warning_until_rebuilt(
    retrieval_settings,
):
    collection = _new_collection("graph-drift", 8)
    scope = PgvectorIndex().add_scope_index(collection, TAGGED)  # both built m 16, efc 64
    _fill(collection, 40, rare_every=3, seed=3)
    graphs = [vector_index_name(collection.pk), scope]
    assert PgvectorIndex().built_graph_options(collection) == dict.fromkeys(graphs, (16, 64))
    with connection.cursor() as cursor:  # as a graph built before the OPTIONS: none stored
        cursor.execute(f"ALTER INDEX {graphs[0]} RESET (m, ef_construction)")
    assert stored_reloptions(graphs[0]) == []
    assert PgvectorIndex().built_graph_options(collection) == dict.fromkeys(graphs, (16, 64))
    assert not [m for m in run_checks(databases=["default"]) if m.id == "retrieval.W003"]

    backend = "retrieval.services.indexes.pgvector.PgvectorIndex"
    options = {"m": 8, "ef_construction": 100}
    retrieval_settings(INDEXES={"default": {"BACKEND": backend, "OPTIONS": options}})
    (warning,) = [m for m in run_checks(databases=["default"]) if m.id == "retrieval.W003"]
    assert warning.obj == collection
    assert "2 of its 2 HNSW graphs" in warning.msg and "m = 8, ef_construction = 100" in warning.msg
    assert all(f"{name} (m = 16, ef_construction = 64)" in warning.msg for name in graphs)
    assert "retrieval_sync_index --collection graph-drift --rebuild" in warning.hint
    # A database check: not run without --database (no query at every manage.py command).
    assert not [m for m in run_checks() if m.id == "retrieval.W003"]

    call_command("retrieval_sync_index", collection="graph-drift", rebuild=True)
    assert PgvectorIndex().built_graph_options(collection) == dict.fromkeys(graphs, (8, 100))
    assert not [m for m in run_checks(databases=["default"]) if m.id == "retrieval.W003"]


@pytest.mark.parametrize(
    "options, message",
    [
        ({"m": 1}, "m must be an integer from 2 to 100"),
        ({"ef_construction": 1001}, "ef_construction must be an integer from 4 to 1000"),
        ({"m": 48, "ef_construction": 64}, "at least twice m (96)"),
        ({"m": "16"}, "m must be an integer"),
    ],
)
def test_construction_options_pgvector_would_refuse_are_refused_when_configured(
    retrieval_settings, options, message
):
    with pytest.raises(ValueError, match=re.escape(message)):
        PgvectorIndex(**options)
    retrieval_settings(
        INDEXES={
            "default": {
                "BACKEND": "retrieval.services.indexes.pgvector.PgvectorIndex",
                "OPTIONS": options,
            }
        }
    )
    text = "\n".join(m.msg for m in run_checks() if m.id == "retrieval.E003")
    assert "RETRIEVAL['INDEXES']['default']: bad OPTIONS" in text and message in text
