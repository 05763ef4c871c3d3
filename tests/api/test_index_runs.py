"""The API enqueues indexing: 202 and a run to follow; reindex, cancel and retry actions."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from retrieval.models import Chunk, Document, IndexRun
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.tasks import index_document
from tests.conftest import editor

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("w"))
    get_or_create_collection("Atlas")
    return client


def test_on_workers_a_new_document_is_accepted_pending_then_indexed(
    api, retrieval_settings, django_capture_on_commit_callbacks
):
    from django_q.models import OrmQ

    retrieval_settings(TASKS_SYNC=False)
    upload = SimpleUploadedFile("north.txt", b"North is up.", "text/plain")
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/documents/", {"collection": "atlas", "file": upload})
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["status"] == "pending" and body["chunks"] == [] and body["content"] == ""
    run = IndexRun.objects.get(pk=body["index_run"])
    assert run.status == IndexRun.Status.QUEUED and run.collection.slug == "atlas"
    assert OrmQ.objects.get().task["args"] == (body["id"],)
    assert api.get(f"/api/index-runs/{run.pk}/").json()["status"] == "queued"
    index_document(body["id"], force=True, run_id=run.pk)  # the worker
    document = api.get(f"/api/documents/{body['id']}/").json()
    assert document["status"] == "indexed" and document["content"] == "North is up."
    assert api.get(f"/api/index-runs/{run.pk}/").json()["status"] == "succeeded"


def test_reposting_keeps_the_indexed_version_searchable_until_the_task_runs(
    api, retrieval_settings, django_capture_on_commit_callbacks
):
    first = api.post(
        "/api/documents/",
        {"collection": "atlas", "external_id": "n", "text": "North is up."},
        format="json",
    )
    assert first.status_code == 201 and first.json()["index_run"]
    chunks = list(Chunk.objects.values_list("pk", "content"))
    retrieval_settings(TASKS_SYNC=False)
    with django_capture_on_commit_callbacks(execute=True):
        again = api.post(
            "/api/documents/",
            {"collection": "atlas", "external_id": "n", "text": "East now."},
            format="json",
        )
    assert again.status_code == 202 and again.json()["status"] == "pending"
    document = Document.objects.get(external_id="n")
    assert (
        document.content == "North is up."
        and list(Chunk.objects.values_list("pk", "content")) == chunks
    )
    index_document(document.pk, force=True, run_id=again.json()["index_run"])
    document.refresh_from_db()
    assert document.content == "East now." and document.status == Document.Status.INDEXED


def test_reindex_cancel_and_retry_actions(api, retrieval_settings, tmp_path):
    created = api.post(
        "/api/documents/",
        {"collection": "atlas", "external_id": "n", "text": "North is up."},
        format="json",
    ).json()
    reindexed = api.post(f"/api/documents/{created['id']}/reindex/")
    assert reindexed.status_code == 200 and reindexed.json()["status"] == "succeeded"
    assert reindexed.json()["documents_indexed"] == 1
    assert api.post("/api/documents/999999/reindex/").status_code == 404

    queued = IndexRun.objects.create(task="reindex_collection")
    cancelled = api.post(f"/api/index-runs/{queued.pk}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = api.post(f"/api/index-runs/{queued.pk}/cancel/")
    assert again.status_code == 409 and "already ended" in again.json()["detail"]

    pill = api.post(
        "/api/documents/",
        {"collection": "atlas", "external_id": "p", "text": "A poison pill."},
        format="json",
    ).json()
    retrieval_settings(EMBEDDERS={"default": {"BACKEND": "tests.support.embedders.PoisonEmbedder"}})
    failed = api.post(
        "/api/documents/",
        {"collection": "atlas", "external_id": "q", "text": "Another poison pill."},
        format="json",
    )
    assert failed.status_code == 400 and "refused" in str(failed.json()["text"])
    assert not Document.objects.filter(external_id="q").exists()  # inline: not left behind
    failed_again = api.post(f"/api/documents/{pill['id']}/reindex/")
    assert failed_again.json()["status"] == "failed"
    run_id = failed_again.json()["id"]
    retrieval_settings(EMBEDDERS={"default": {"BACKEND": "retrieval.testing.KeywordEmbedder"}})
    retried = api.post(f"/api/index-runs/{run_id}/retry/")
    assert retried.status_code == 200, retried.json()
    assert retried.json()["task"] == "index_documents" and retried.json()["status"] == "succeeded"
    assert Document.objects.get(external_id="p").status == Document.Status.INDEXED
    nothing = api.post(f"/api/index-runs/{retried.json()['id']}/retry/")
    assert nothing.status_code == 409 and "nothing to retry" in nothing.json()["detail"]
