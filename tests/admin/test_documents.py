"""Uploading documents, reading one with its chunks, and the document actions."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from retrieval.models import Chunk, Document, IndexRun, Triple
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

pytestmark = pytest.mark.django_db

ADD = "admin:retrieval_document_add"
CHANGELIST = "admin:retrieval_document_changelist"


def upload(name: str, data: bytes, content_type: str = "text/plain") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


def test_many_files_are_stored_indexed_and_listed_with_their_status(admin_client, keyword_settings):
    collection, _ = get_or_create_collection("uploads")
    files = [
        upload("north.txt", b"North is up.\n\nNorth again."),
        upload("east.md", b"# East\n\nEast is right.", "text/markdown"),
    ]
    response = admin_client.post(reverse(ADD), {"collection": collection.pk, "files": files})
    assert response.status_code == 302 and response.url == reverse(CHANGELIST)
    documents = {d.external_id: d for d in Document.objects.filter(collection=collection)}
    assert set(documents) == {"north.txt", "east.md"}
    for document in documents.values():
        assert document.status == Document.Status.INDEXED
        assert document.source_file.name.startswith("retrieval/sources/")
        assert document.chunks.count() >= 1
    assert documents["east.md"].mime_type == "text/markdown"
    run = IndexRun.objects.get()
    assert (run.documents_total, run.documents_indexed) == (2, 2)
    listing = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert listing.count("retrieval-status-indexed") == 2


def test_a_second_upload_of_a_name_replaces_that_document(admin_client, keyword_settings):
    collection, _ = get_or_create_collection("uploads")
    for text in (b"North only.", b"East only."):
        admin_client.post(
            reverse(ADD), {"collection": collection.pk, "files": [upload("a.txt", text)]}
        )
    document = Document.objects.get()
    assert document.content == "East only."
    assert list(document.chunks.values_list("content", flat=True)) == ["East only."]


def test_unsupported_oversize_and_missing_files_are_form_errors(
    admin_client, keyword_settings, retrieval_settings
):
    collection, _ = get_or_create_collection("uploads")
    url = reverse(ADD)
    response = admin_client.post(
        url,
        {
            "collection": collection.pk,
            "files": [
                upload("fine.txt", b"North."),
                upload("tool.exe", b"MZ\x00", "application/x-msdownload"),
            ],
        },
    )
    assert response.status_code == 200
    assert "No parser accepts tool.exe" in response.content.decode()
    retrieval_settings(MAX_UPLOAD_BYTES=10)
    response = admin_client.post(
        url, {"collection": collection.pk, "files": [upload("big.txt", b"x" * 11)]}
    )
    assert "big.txt: 11 bytes; the limit is 10 (MAX_UPLOAD_BYTES)." in response.content.decode()
    response = admin_client.post(url, {"collection": collection.pk})
    assert response.status_code == 200 and "This field is required." in response.content.decode()
    response = admin_client.post(url, {"files": [upload("a.txt", b"North.")]})
    assert response.status_code == 200 and "This field is required." in response.content.decode()
    assert Document.objects.count() == 0 and IndexRun.objects.count() == 0


def test_a_file_that_cannot_be_parsed_fails_with_its_reason(admin_client, keyword_settings):
    collection, _ = get_or_create_collection("uploads")
    response = admin_client.post(
        reverse(ADD),
        {
            "collection": collection.pk,
            "files": [upload("bad.pdf", b"not a pdf", "application/pdf")],
        },
        follow=True,
    )
    document = Document.objects.get()
    assert document.status == Document.Status.FAILED and document.error
    body = response.content.decode()
    assert "retrieval-status-failed" in body and "1 failed" in body


def test_the_upload_page_renders_with_the_collection_preselected(admin_client, atlas):
    response = admin_client.get(reverse(ADD), {"collection": atlas.pk})
    body = response.content.decode()
    assert response.status_code == 200
    assert 'type="file" name="files" multiple' in body
    assert f'<option value="{atlas.pk}" selected>' in body


def test_a_document_page_highlights_each_chunk_with_an_anchor(admin_client, atlas):
    document = Document.objects.get(external_id="map.txt")
    chunks = list(document.chunks.order_by("index"))
    assert len(chunks) == 2
    body = admin_client.get(
        reverse("admin:retrieval_document_change", args=[document.pk])
    ).content.decode()
    for chunk in chunks:
        assert f'id="retrieval-chunk-{chunk.index}"' in body
        assert f'data-chunks="{chunk.index}">{chunk.content}</span>' in body
        assert f'id="retrieval-chunk-row-{chunk.index}"' in body
    assert "&quot;lang&quot;: &quot;en&quot;" in body  # the chunks' metadata


def test_a_pdf_page_shows_page_numbers(admin_client, keyword_settings, sample_docs):
    collection, _ = get_or_create_collection("guide")
    pdf = (sample_docs / "user-guide.pdf").read_bytes()
    admin_client.post(
        reverse(ADD),
        {"collection": collection.pk, "files": [upload("user-guide.pdf", pdf, "application/pdf")]},
    )
    document = Document.objects.get()
    pages = sorted(set(document.chunks.exclude(page=None).values_list("page", flat=True)))
    assert len(pages) >= 2
    body = admin_client.get(
        reverse("admin:retrieval_document_change", args=[document.pk])
    ).content.decode()
    for page in pages:
        assert f'id="retrieval-page-{page}">Page {page}</span>' in body


def test_reindex_action_rebuilds_chunks_from_the_stored_text(admin_client, atlas):
    document = Document.objects.get(external_id="map.txt")
    count = document.chunks.count()
    document.chunks.all().delete()
    chosen = {"action": "reindex_documents", ACTION_CHECKBOX_NAME: [document.pk]}
    asked = admin_client.post(reverse(CHANGELIST), chosen)
    assert asked.status_code == 200 and "its chunks are replaced" in asked.content.decode()
    assert document.chunks.count() == 0  # nothing before the confirmation
    response = admin_client.post(reverse(CHANGELIST), {**chosen, "confirm": "yes"}, follow=True)
    assert response.status_code == 200
    assert document.chunks.count() == count
    assert "1 indexed, 0 skipped, 0 failed" in response.content.decode()


def test_reindexing_documents_names_their_triples_and_keeps_them(admin_client, graph_settings):
    library, _ = get_or_create_collection("library")
    ingest(
        library,
        [
            Source.from_text("Ada_Lovelace wrote Notes.\n\nThe sky is blue", external_id="a"),
            Source.from_text("Charles_Babbage designed Engines.", external_id="b"),
        ],
    )
    extract_graph(library)
    triples = dict(Triple.objects.values_list("pk", "chunk__content"))
    graph_settings.seen.clear()
    chosen = {
        "action": "reindex_documents",
        ACTION_CHECKBOX_NAME: list(library.documents.values_list("pk", flat=True)),
    }
    asked = admin_client.post(reverse(CHANGELIST), chosen)
    said = " ".join(asked.content.decode().split())
    assert "Knowledge graph (2 triples now)" in said
    assert "<td>library</td><td>a</td><td>1</td><td>1</td>" in said  # chunks, triples
    old_chunks = set(Chunk.objects.values_list("pk", flat=True))
    admin_client.post(reverse(CHANGELIST), {**chosen, "confirm": "yes"})
    assert not old_chunks & set(Chunk.objects.values_list("pk", flat=True))  # replaced
    assert dict(Triple.objects.values_list("pk", "chunk__content")) == triples
    graph_run = IndexRun.objects.get(task="extract_graph")
    assert graph_run.status == IndexRun.Status.SUCCEEDED and graph_settings.seen == []


def test_delete_with_chunks_asks_with_counts_then_deletes(admin_client, atlas):
    document = Document.objects.get(external_id="map.txt")
    data = {"action": "delete_with_chunks", ACTION_CHECKBOX_NAME: [document.pk]}
    page = admin_client.post(reverse(CHANGELIST), data)
    assert page.status_code == 200 and "their 2 chunks will be deleted" in page.content.decode()
    assert Document.objects.filter(pk=document.pk).exists()
    done = admin_client.post(reverse(CHANGELIST), {**data, "confirm": "yes"}, follow=True)
    assert "1 documents and 2 chunks deleted." in done.content.decode()
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not Chunk.objects.filter(document_id=document.pk).exists()
    assert Document.objects.filter(external_id="hill.txt").exists()


def test_a_missing_stored_file_fails_only_its_document(admin_client, keyword_settings):
    collection, _ = get_or_create_collection("uploads")
    admin_client.post(
        reverse(ADD),
        {
            "collection": collection.pk,
            "files": [upload("a.txt", b"North."), upload("b.txt", b"East.")],
        },
    )
    lost = Document.objects.get(external_id="a.txt")
    lost.source_file.storage.delete(lost.source_file.name)
    admin_client.post(
        reverse(CHANGELIST),
        {
            "action": "reindex_documents",
            ACTION_CHECKBOX_NAME: list(Document.objects.values_list("pk", flat=True)),
            "confirm": "yes",
        },
    )
    lost.refresh_from_db()
    assert lost.status == Document.Status.FAILED and "cannot be read" in lost.error
    assert Document.objects.get(external_id="b.txt").status == Document.Status.INDEXED


def test_editing_metadata_indexes_the_document_again(admin_client, atlas):
    document = Document.objects.get(external_id="hill.txt")
    response = admin_client.post(
        reverse("admin:retrieval_document_change", args=[document.pk]),
        {"title": "Hill song", "source_path": "", "metadata": '{"lang": "fr"}'},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    document.refresh_from_db()
    assert document.status == Document.Status.INDEXED and document.title == "Hill song"
    assert document.metadata["lang"] == "fr" and "year" not in document.metadata
    assert [c.metadata["lang"] for c in document.chunks.all()] == ["fr"]
    assert IndexRun.objects.count() == 2
