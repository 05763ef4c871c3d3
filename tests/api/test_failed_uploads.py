"""An upload that cannot be parsed leaves no file in MEDIA_ROOT (issue 30).

On workers the document stays, failed with its reason; inline (``TASKS_SYNC``) the
request answers 400 and a document it created is not kept; a document that existed
keeps its indexed content.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from retrieval.models import Chunk, Document, IndexRun
from retrieval.services.collections import get_or_create_collection
from retrieval.services.runs import enqueue_run
from retrieval.tasks import index_document
from tests.conftest import editor
from tests.services.parsers.test_pdf import THREE_PAGES, build_pdf

pytestmark = pytest.mark.django_db


def stored_files() -> list[str]:
    media = Path(settings.MEDIA_ROOT)
    return sorted(str(p.relative_to(media)) for p in media.rglob("*") if p.is_file())


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("uploader"))
    get_or_create_collection("atlas")
    return client


def upload(api: APIClient, name: str, data: bytes, kind: str = "application/pdf"):
    file = SimpleUploadedFile(name, data, kind)
    return api.post("/api/documents/", {"collection": "atlas", "file": file})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.7 not really", "not a readable PDF"),
        (build_pdf(THREE_PAGES), "the limit is 2 (MAX_PDF_PAGES)"),
    ],
)
def test_inline_a_new_upload_that_fails_to_parse_leaves_nothing(
    api, retrieval_settings, data, reason
):
    retrieval_settings(MAX_PDF_PAGES=2)
    refused = upload(api, "report.pdf", data)
    assert refused.status_code == 400 and reason in refused.json()["file"][0]
    assert not Document.objects.filter(external_id="report.pdf").exists()
    assert stored_files() == []
    run = IndexRun.objects.latest("pk")
    assert run.status == IndexRun.Status.FAILED and reason in run.errors[0]["error"]


def test_inline_a_document_that_existed_keeps_its_indexed_content(
    api, django_capture_on_commit_callbacks
):
    assert upload(api, "notes.txt", b"North is up.", "text/plain").status_code == 201
    chunks = list(Chunk.objects.values_list("pk", "content"))
    with django_capture_on_commit_callbacks(execute=True):  # the replaced file's deletion
        refused = upload(api, "notes.txt", b"   \n  ", "text/plain")
    assert refused.status_code == 400 and "it has no text" in refused.json()["file"][0]
    document = Document.objects.get(external_id="notes.txt")
    assert document.content == "North is up." and document.status == Document.Status.FAILED
    assert list(Chunk.objects.values_list("pk", "content")) == chunks
    assert not document.source_file and stored_files() == []


def test_on_workers_the_failed_document_stays_with_its_reason_but_not_its_file(
    api, retrieval_settings, django_capture_on_commit_callbacks
):
    retrieval_settings(TASKS_SYNC=False)
    with django_capture_on_commit_callbacks(execute=True):
        queued = upload(api, "report.pdf", b"%PDF-1.7 not really")
    assert queued.status_code == 202 and len(stored_files()) == 1
    index_document(queued.json()["id"], force=True, run_id=queued.json()["index_run"])  # worker
    document = Document.objects.get(external_id="report.pdf")
    assert document.status == Document.Status.FAILED and "not a readable PDF" in document.error
    assert not document.source_file and stored_files() == []
    run = IndexRun.objects.get(pk=queued.json()["index_run"])
    assert run.status == IndexRun.Status.FAILED and "not a readable PDF" in run.errors[0]["error"]


def test_a_failure_that_is_not_the_files_keeps_it_for_a_retry(api):
    assert upload(api, "notes.txt", b"North is up.", "text/plain").status_code == 201
    document = Document.objects.get(external_id="notes.txt")
    deep: dict = {}
    for _ in range(30):
        deep = {"a": deep}
    Document.objects.filter(pk=document.pk).update(metadata=deep)  # stored before the limit
    run = enqueue_run(index_document, document.pk, force=True, sync=True)
    assert run.status == IndexRun.Status.FAILED and "MAX_JSON_DEPTH" in run.errors[0]["error"]
    assert stored_files() == [Document.objects.get(pk=document.pk).source_file.name]
