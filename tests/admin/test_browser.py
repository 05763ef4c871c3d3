"""The admin screens in a real headless Chromium: upload, read, watch a run, compare retrievers.

Screenshots go to ``test-artifacts/admin-*.png``.
"""

from __future__ import annotations

import re

import pytest

from retrieval.models import Document, IndexRun
from retrieval.services.ingestion.collections import get_or_create_collection
from tests.conftest import SAMPLE_DOCS
from tests.support.browser import ARTIFACTS, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_upload_read_watch_and_compare(keyword_settings, browser_page, live_server, admin_login):
    page = browser_page
    admin_login(page, live_server)
    collection, _ = get_or_create_collection("guide")

    # Upload a PDF and a text file at once; both are indexed and listed with their status.
    page.goto(f"{live_server.url}/admin/retrieval/document/add/")
    page.select_option("#id_collection", str(collection.pk))
    notes = SAMPLE_DOCS / "glossary.txt"
    page.set_input_files("#id_files", [str(SAMPLE_DOCS / "user-guide.pdf"), str(notes)])
    screenshot(page, "admin-upload")
    page.click("input[name=_upload]")
    page.wait_for_url(re.compile(r".*/admin/retrieval/document/$"))
    row = page.locator("#result_list tr", has_text="user-guide.pdf")
    assert row.locator(".retrieval-status").inner_text() == "Indexed"
    assert page.locator(".retrieval-status-indexed").count() == 2
    screenshot(page, "admin-documents")

    # Its page: the text with each chunk highlighted; clicking one selects its row.
    row.locator("th a").click()
    page.wait_for_selector(".retrieval-text .retrieval-chunk")
    document = Document.objects.get(external_id="user-guide.pdf")
    chunks = document.chunks.count()
    assert page.locator(".retrieval-anchor").count() == chunks
    assert page.locator(".retrieval-page").first.inner_text() == "Page 1"
    page.locator(".retrieval-chunk[data-chunks='2']").first.click()
    page.wait_for_selector("#retrieval-chunk-row-2.retrieval-selected")
    assert page.url.endswith("#retrieval-chunk-2")
    screenshot(page, "admin-document")
    page.screenshot(path=str(ARTIFACTS / "admin-document-chunk.png"))  # the selected chunk in view

    # A running index run: its progress updates in place as the worker writes it.
    run = IndexRun.objects.create(
        collection=collection, task="ingest", status=IndexRun.Status.RUNNING, documents_total=3
    )
    page.goto(f"{live_server.url}/admin/retrieval/indexrun/")
    progress = page.locator(f"[data-retrieval-run='{run.pk}'] .retrieval-progress-text")
    assert progress.inner_text() == "0 / 3 documents, 0 chunks"
    url = page.url
    IndexRun.objects.filter(pk=run.pk).update(documents_done=2, chunks_written=5)
    page.wait_for_function(
        "id => document.querySelector(`[data-retrieval-run='${id}'] .retrieval-progress-text`)"
        ".textContent === '2 / 3 documents, 5 chunks'",
        arg=run.pk,
    )
    IndexRun.objects.filter(pk=run.pk).update(documents_done=3, status=IndexRun.Status.SUCCEEDED)
    page.wait_for_function(
        "id => document.querySelector(`[data-retrieval-run-status='${id}'] .retrieval-status`)"
        ".textContent === 'Succeeded'",
        arg=run.pk,
    )
    assert page.url == url  # no reload
    assert page.locator(f"[data-retrieval-run='{run.pk}'] progress").get_attribute("max") == "3"
    screenshot(page, "admin-index-runs")

    # The playground: BM25 and hybrid side by side, with each leg's score and rank.
    page.goto(f"{live_server.url}/admin/retrieval/collection/playground/")
    page.select_option("#id_collection", str(collection.pk))
    page.fill("#id_query", "installation pgvector extension")
    page.select_option("#id_left", "bm25")
    page.select_option("#id_right", "hybrid")
    page.click("#retrieval-playground-form input[type=submit]")
    page.wait_for_selector("section[data-searcher='hybrid'] .retrieval-result")
    left = page.locator("section[data-searcher='bm25'] .retrieval-result")
    right = page.locator("section[data-searcher='hybrid'] .retrieval-result")
    assert left.count() >= 1 and right.count() >= 1
    # Each result's legs, side by side (which result comes first is the fusion's business).
    legs = right.locator(".retrieval-legs").all_inner_texts()
    assert any("bm25" in table and "dense" in table for table in legs)
    assert (
        "pgvector" in left.first.inner_text().lower()
        or "install" in left.first.inner_text().lower()
    )
    screenshot(page, "admin-playground")
