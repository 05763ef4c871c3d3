"""Choosing an index for a new collection from the command line and the API; deletes
through the API reach the external engine once they commit (Chroma, started by the tests)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from retrieval.models import Collection, Document, IndexOperation
from retrieval.services.indexes import index_for
from tests.conftest import editor
from tests.services.indexes.conftest import BACKENDS, engine_for
from tests.support.engines import free_port


@pytest.fixture
def chroma(engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, "chroma", tmp_path_factory)
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS["chroma"], "OPTIONS": engine.options}},
        TASKS_SYNC=True,
    )
    return engine


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("reader"))
    return client


@pytest.mark.django_db(transaction=True)
def test_ingest_index_option_sets_a_new_collection_s_index_only(chroma, tmp_path):
    (tmp_path / "n.txt").write_text("north")
    (tmp_path / "e.txt").write_text("east")
    out = StringIO()
    call_command("retrieval_ingest", str(tmp_path), collection="maps", index="ext", stdout=out)
    collection = Collection.objects.get(name="maps")
    assert (collection.index, collection.external_index) == ("ext", True)
    assert index_for(collection).count(collection) == 2  # drained on commit
    with pytest.raises(CommandError, match="uses index 'ext'"):
        call_command(
            "retrieval_ingest", str(tmp_path), collection="maps", index="default", stdout=StringIO()
        )
    with pytest.raises(CommandError, match="Unknown index 'nope'"):
        call_command("retrieval_ingest", str(tmp_path), collection="new", index="nope")


@pytest.mark.django_db(transaction=True)
def test_api_creates_on_an_index_and_deletes_reach_the_engine(chroma, api):
    created = api.post("/api/collections/", {"name": "Atlas", "index": "ext"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["index"] == "ext"
    refused = api.patch("/api/collections/atlas/", {"index": "default"}, format="json")
    assert refused.status_code == 400 and "cannot change" in refused.content.decode()
    unknown = api.post("/api/collections/", {"name": "B", "index": "nope"}, format="json")
    assert unknown.status_code == 400 and "Unknown index" in unknown.content.decode()
    for key, text in {"n": "north", "e": "east"}.items():
        response = api.post(
            "/api/documents/",
            {"collection": "atlas", "external_id": key, "text": text},
            format="json",
        )
        assert response.status_code in (201, 202), response.content
    collection = Collection.objects.get(name="Atlas")
    index = index_for(collection)
    assert index.count(collection) == 2
    document = Document.objects.get(external_id="n")
    assert api.delete(f"/api/documents/{document.pk}/").status_code == 204
    assert not IndexOperation.objects.exists()
    assert index.count(collection) == 1


@pytest.mark.django_db
def test_a_collection_deleted_through_the_api_schedules_one_drain(
    api, keyword_settings, retrieval_settings, django_capture_on_commit_callbacks
):
    from django_q.models import OrmQ

    down = {"host": "127.0.0.1", "port": free_port(), "timeout": 1}  # the drain never runs here
    retrieval_settings(
        INDEXES={"ext": {"BACKEND": BACKENDS["chroma"], "OPTIONS": down}}, TASKS_SYNC=False
    )
    for name in ("Atlas", "Globe"):  # Globe stays on the external index
        created = api.post("/api/collections/", {"name": name, "index": "ext"}, format="json")
        assert created.status_code == 201, created.content
    OrmQ.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        assert api.delete("/api/collections/atlas/").status_code == 204
    assert IndexOperation.objects.filter(kind=IndexOperation.Kind.DROP).count() == 1
    queued = [task.task["func"] for task in OrmQ.objects.all()]
    assert queued == ["retrieval.tasks.drain_index_outbox"]  # the drop's, once
