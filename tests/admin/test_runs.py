"""Index runs: the progress endpoint the changelist polls."""

from __future__ import annotations

import pytest
from django.urls import reverse

from retrieval.models import IndexRun

pytestmark = pytest.mark.django_db

PROGRESS = "admin:retrieval_indexrun_progress"


def test_progress_reports_each_asked_run(admin_client, atlas):
    finished = IndexRun.objects.get()
    running = IndexRun.objects.create(
        collection=atlas,
        task="ingest",
        status=IndexRun.Status.RUNNING,
        documents_total=4,
        documents_done=1,
        chunks_written=3,
    )
    response = admin_client.get(reverse(PROGRESS), {"ids": f"{finished.pk},{running.pk}"})
    assert response.status_code == 200
    runs = {run["id"]: run for run in response.json()["runs"]}
    assert runs[finished.pk]["status"] == "succeeded" and not runs[finished.pk]["active"]
    assert runs[finished.pk]["done"] == 2
    assert (runs[running.pk]["done"], runs[running.pk]["total"], runs[running.pk]["chunks"]) == (
        1,
        4,
        3,
    )
    assert runs[running.pk]["active"]


def test_the_changelist_marks_active_runs_for_the_script(admin_client, atlas):
    running = IndexRun.objects.create(
        collection=atlas, task="ingest", status="running", documents_total=4
    )
    body = admin_client.get(reverse("admin:retrieval_indexrun_changelist")).content.decode()
    assert f'data-retrieval-run="{running.pk}" data-active="1"' in body
    assert "retrieval/admin/runs.js" in body
    assert "0 / 4 documents, 0 chunks" in body


def test_bad_ids_are_a_400_and_anonymous_users_are_sent_to_log_in(admin_client, client, atlas):
    for ids in ("abc", "1,,x", ",".join(["1"] * 201)):
        response = admin_client.get(reverse(PROGRESS), {"ids": ids})
        assert response.status_code == 400 and "comma-separated" in response.json()["error"]
    assert admin_client.get(reverse(PROGRESS)).json() == {"runs": []}
    anonymous = client.get(reverse(PROGRESS), {"ids": "1"})
    assert anonymous.status_code == 302 and "/login/" in anonymous.url


def test_a_failed_run_lists_its_errors(admin_client, atlas):
    run = IndexRun.objects.create(
        collection=atlas,
        task="ingest",
        status="failed",
        errors=[{"document": "bad.pdf", "error": "not a PDF"}],
    )
    body = admin_client.get(
        reverse("admin:retrieval_indexrun_change", args=[run.pk])
    ).content.decode()
    assert "<td>bad.pdf</td><td>not a PDF</td>" in body
    assert body.count(">Errors:<") == 1  # the table, not the JSON field again


def test_a_graph_run_counts_chunks_read_and_triples_written(admin_client, atlas):
    run = IndexRun.objects.create(
        collection=atlas, task="graph", status="running", documents_total=9, chunks_written=4
    )
    body = admin_client.get(reverse("admin:retrieval_indexrun_changelist")).content.decode()
    assert "0 / 9 chunks, 4 triples" in body
    progress = admin_client.get(reverse(PROGRESS), {"ids": str(run.pk)}).json()["runs"][0]
    assert progress["units"] == ["chunks", "triples"]


def test_a_run_resumed_after_its_worker_stopped_links_its_resume_and_back(admin_client, atlas):
    dead = IndexRun.objects.create(
        collection=atlas,
        task="reindex_collection",
        status="failed",
        message="The worker stopped: no progress since ...; resumed automatically as run #2.",
    )
    resume = IndexRun.objects.create(
        collection=atlas,
        task="reindex_collection",
        status="succeeded",
        resumed_from=dead,
        message=f"Resumed run #{dead.pk} after its worker stopped. 7 indexed, ...",
    )
    dead_page, resume_page = (
        admin_client.get(reverse("admin:retrieval_indexrun_change", args=[run.pk])).content.decode()
        for run in (dead, resume)
    )
    resume_url = reverse("admin:retrieval_indexrun_change", args=[resume.pk])
    assert f'<a href="{resume_url}">{resume}</a>' in dead_page
    assert "resumed automatically as run #2." in dead_page
    dead_url = reverse("admin:retrieval_indexrun_change", args=[dead.pk])
    assert f'href="{dead_url}"' in resume_page
    assert f"Resumed run #{dead.pk} after its worker stopped." in resume_page


def test_an_upload_queued_for_a_worker_says_so(admin_client, atlas, retrieval_settings):
    from django.contrib.messages import get_messages
    from django.core.files.uploadedfile import SimpleUploadedFile

    retrieval_settings(TASKS_SYNC=False)
    upload = SimpleUploadedFile("north.txt", b"North is up.", "text/plain")
    response = admin_client.post(
        reverse("admin:retrieval_document_add"), {"collection": atlas.pk, "files": [upload]}
    )
    said = [str(message) for message in get_messages(response.wsgi_request)]
    run = IndexRun.objects.latest("pk")
    assert said == ["1 file(s) uploaded.", f"Index run #{run.pk} queued for a worker."]


def test_runs_are_cancelled_and_retried_from_the_list(admin_client, atlas, retrieval_settings):
    from retrieval.models import Document

    retrieval_settings(TASKS_SYNC=False)
    queued = IndexRun.objects.create(collection=atlas, task="ingest", status="queued")
    document = Document.objects.filter(collection=atlas).first()
    failed = IndexRun.objects.create(
        collection=atlas,
        task="index_documents",
        status="failed",
        errors=[{"document": document.external_id, "error": "boom"}],
    )
    changelist = reverse("admin:retrieval_indexrun_changelist")
    admin_client.post(changelist, {"action": "cancel_runs", "_selected_action": [queued.pk]})
    queued.refresh_from_db()
    assert queued.status == "cancelled"
    admin_client.post(changelist, {"action": "retry_runs", "_selected_action": [failed.pk]})
    retry = IndexRun.objects.latest("pk")
    assert retry.pk > failed.pk and retry.task == "index_documents"
    assert retry.options["args"][0] == [document.pk]


def test_who_may_only_view_runs_is_offered_no_run_actions(client, atlas):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_indexrun"))
    client.force_login(user)
    page = client.get(reverse("admin:retrieval_indexrun_changelist"))
    assert page.status_code == 200 and "cancel_runs" not in page.content.decode()
    run = IndexRun.objects.create(collection=atlas, task="ingest", status="queued")
    refused = client.post(
        reverse("admin:retrieval_indexrun_changelist"),
        {"action": "cancel_runs", "_selected_action": [run.pk]},
    )
    run.refresh_from_db()
    assert run.status == "queued" and refused.status_code in (200, 302)
