"""The REST API on the real database: CRUD, search, validation, permissions, schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from retrieval.models import Chunk, Collection, Document
from tests.conftest import editor

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("reader"))
    return client


@pytest.fixture
def atlas(api) -> dict:
    response = api.post(
        "/api/collections/", {"name": "Atlas", "description": "maps"}, format="json"
    )
    assert response.status_code == 201, response.json()
    for key, text in {"n": "North is up on the map.", "e": "East is where the sun rises."}.items():
        created = api.post(
            "/api/documents/",
            {"collection": "atlas", "external_id": key, "text": text, "metadata": {"axis": key}},
            format="json",
        )
        assert created.status_code == 201, created.json()
    return response.json()


def test_anonymous_requests_are_refused(keyword_settings):
    assert APIClient().get("/api/collections/").status_code == 403
    assert APIClient().post("/api/search/", {"query": "x"}, format="json").status_code == 403


def test_collection_crud(api, atlas):
    assert atlas["slug"] == "atlas" and atlas["dimensions"] == 3 and atlas["embedder"] == "default"
    listing = api.get("/api/collections/").json()
    assert listing["count"] == 1 and listing["results"][0]["documents"] == 2
    updated = api.patch("/api/collections/atlas/", {"description": "a book of maps"}, format="json")
    assert updated.status_code == 200 and updated.json()["description"] == "a book of maps"
    refused = api.patch("/api/collections/atlas/", {"embedder": "other"}, format="json")
    assert refused.status_code == 400 and "cannot change" in str(refused.json())
    duplicate = api.post("/api/collections/", {"name": "Atlas"}, format="json")
    assert duplicate.status_code == 400
    unknown = api.post(
        "/api/collections/", {"name": "B", "default_retriever": "psychic"}, format="json"
    )
    assert unknown.status_code == 400 and "Unknown retriever 'psychic'" in str(unknown.json())
    assert api.delete("/api/collections/atlas/").status_code == 204
    assert not Chunk.objects.exists() and api.get("/api/collections/atlas/").status_code == 404


def test_documents_list_filter_detail_delete(api, atlas):
    listing = api.get(
        "/api/documents/", {"collection": "atlas", "metadata": '{"axis": "e"}'}
    ).json()
    assert [d["external_id"] for d in listing["results"]] == ["e"]
    document = Document.objects.get(external_id="n")
    detail = api.get(f"/api/documents/{document.pk}/").json()
    assert detail["content"] == "North is up on the map." and detail["status"] == "indexed"
    chunk = detail["chunks"][0]
    assert detail["content"][chunk["start"] : chunk["end"]] == chunk["content"]
    chunks = api.get("/api/chunks/", {"document": document.pk}).json()
    assert chunks["count"] == len(detail["chunks"])
    assert api.delete(f"/api/documents/{document.pk}/").status_code == 204
    assert api.get(f"/api/documents/{document.pk}/").status_code == 404
    assert api.get("/api/documents/", {"metadata": "[1]"}).status_code == 400
    assert api.get("/api/chunks/", {"document": "x"}).status_code == 400


def test_a_text_document_is_indexed_under_its_title_alone(api, atlas):
    # The text is kept as a file named after the id, yet the made-up id names no topic.
    created = api.post(
        "/api/documents/",
        {
            "collection": "atlas",
            "external_id": "faq-7",
            "title": "Compass",
            "text": "Hold it flat.",
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert Chunk.objects.get(document__external_id="faq-7").indexed_prefix == "Compass"


def test_document_that_cannot_be_indexed_is_a_400(api, atlas):
    empty = api.post(
        "/api/documents/", {"collection": "atlas", "external_id": "z", "text": "   "}, format="json"
    )
    assert empty.status_code == 400
    missing = api.post(
        "/api/documents/", {"collection": "nowhere", "external_id": "z", "text": "x"}, format="json"
    )
    assert missing.status_code == 400 and "collection" in missing.json()


def test_search_returns_explained_results(api, atlas):
    response = api.post(
        "/api/search/", {"query": "north", "collection": "atlas", "top_k": 2}, format="json"
    )
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert results[0]["document"] == "n" and results[0]["rank"] == 1
    assert set(results[0]["metadata"]["legs"]) == {"bm25", "dense"}
    dense = api.post(
        "/api/search/",
        {
            "query": "north",
            "collection": "atlas",
            "retriever": "dense",
            "filters": {"documents": ["e"]},
        },
        format="json",
    ).json()["results"]
    assert [r["document"] for r in dense] == ["e"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "collection": "atlas", "retriever": "psychic"}, "retriever"),
        ({"query": "x", "collection": "atlas", "filters": {"colour": 1}}, "filters"),
        ({"query": "x", "collection": "atlas", "top_k": 0}, "top_k"),
        ({"collection": "atlas"}, "query"),
        ({"query": "x", "collection": "atlas", "filters": {"documents": ["n\x00"]}}, "filters"),
        ({"query": "x", "collection": "atlas", "filters": {"metadata": {"a": "\x00"}}}, "filters"),
    ],
)
def test_bad_search_input_is_a_400_naming_the_field(api, atlas, body, field):
    response = api.post("/api/search/", body, format="json")
    assert response.status_code == 400 and field in response.json()


def test_metadata_holding_a_nul_is_a_400_and_nothing_is_written(api, atlas):
    documents = Document.objects.count()
    for url, body in (
        ("/api/documents/", {"collection": "atlas", "external_id": "z", "text": "north"}),
        ("/api/collections/", {"name": "Globe"}),
    ):
        for metadata in ({"axis": "n\x00"}, {"ax\x00is": "n"}):
            answer = api.post(url, {**body, "metadata": metadata}, format="json")
            assert answer.status_code == 400, answer.content
            assert "contains a NUL character" in answer.json()["metadata"][0]
    listed = api.get("/api/documents/", {"metadata": '{"axis": "n\\u0000"}'})
    assert listed.status_code == 400 and "NUL" in listed.json()["metadata"][0]
    assert Document.objects.count() == documents
    assert not Collection.objects.filter(name="Globe").exists()


def test_search_runs_pipelines_rewrites_reranks_and_returns_the_trace(
    api, atlas, retrieval_settings
):
    retrieval_settings(
        PIPELINES={"keywords": {"retrievers": ["bm25"]}},
        RERANKERS={
            "shortest": {
                "BACKEND": "retrieval.services.rerankers.score.ScoreReranker",
                "OPTIONS": {"function": "tests.services.query.test_pipelines.shortest_first"},
            }
        },
    )
    body = {
        "query": "north sun",
        "collection": "atlas",
        "pipeline": "keywords",
        "rewrite": "prf",
        "rerank": "shortest",
        "history": [{"role": "user", "content": "maps"}],
    }
    response = api.post("/api/search/", body, format="json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert [r["document"] for r in answer["results"]] == ["n", "e"]  # shorter text first
    # A plain string is an earlier user message, as in Python (RM3 searches it with the query).
    as_string = api.post("/api/search/", {**body, "history": ["maps"]}, format="json").json()
    assert as_string["trace"]["events"][0] == answer["trace"]["events"][0]
    assert answer["results"][0]["metadata"]["original_score"] > 0
    stages = [event["stage"] for event in answer["trace"]["events"]]
    assert stages == ["rewrite", "rerank", "pipeline"]
    assert answer["trace"]["events"][0]["original"] == "north sun"
    for bad, field in (
        ({"pipeline": "nope"}, "pipeline"),
        ({"rerank": "nope"}, "rerank"),
        ({"pipeline": "keywords", "retriever": "bm25"}, "non_field_errors"),
        ({"history": "not a list"}, "history"),
        ({"history": [{"role": "user"}]}, "history"),
        ({"history": [["maps"]]}, "history"),
        ({"history": ["x" * 10_001]}, "history"),
        # Searched with RM3, then its trace could not be stored: a search without a trace.
        ({"history": ["m\u0000aps"]}, "history"),
        ({"history": [{"role": "assistant", "content": "m\u0000aps"}]}, "history"),
        ({"history": [{"role": "system", "content": "Answer in French."}]}, "history"),
    ):
        refused = api.post("/api/search/", {**body, **bad}, format="json")
        assert refused.status_code == 400 and field in refused.json(), refused.json()
    assert refused.json()["history"] == {
        "0": ["The turn has the role 'system'; a turn's role is one of ('user', 'assistant')."]
    }


def test_search_in_an_unknown_collection_is_a_404_naming_it(api, atlas):
    response = api.post("/api/search/", {"query": "x", "collection": "nowhere"}, format="json")
    assert response.status_code == 404
    assert response.json() == {"collection": ["No collection 'nowhere'."]}


def test_openapi_schema_and_docs(api, client):
    schema = api.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    document = schema.json()
    assert document["openapi"].startswith("3.")
    assert {"/api/collections/", "/api/documents/", "/api/chunks/", "/api/search/"} <= set(
        document["paths"]
    )
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
    assert Collection.objects.count() == 0


def pdf_bytes(*pages: str) -> bytes:
    """A PDF of a chapter a page, each headed by its first word (chunks keep their pages:
    one would run on over a page turn inside a chapter)."""
    import pymupdf

    document = pymupdf.open()
    for text in pages:
        document.new_page().insert_text((72, 72), f"{text.split()[0]}\n{text}")
    document.set_toc([[1, text.split()[0], number] for number, text in enumerate(pages, 1)])
    return document.tobytes()


def test_upload_a_pdf_then_follow_its_index_run(api, atlas):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile(
        "guide.pdf", pdf_bytes("North page.", "Up page."), "application/pdf"
    )
    response = api.post(
        "/api/documents/", {"collection": "atlas", "file": upload, "metadata": '{"kind": "guide"}'}
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["external_id"] == "guide.pdf" and body["mime_type"] == "application/pdf"
    assert [c["page"] for c in body["chunks"]] == [1, 2] and body["metadata"]["kind"] == "guide"
    runs = api.get("/api/index-runs/").json()
    assert runs["count"] == 3  # two texts in the fixture, then this file
    latest = api.get(f"/api/index-runs/{runs['results'][0]['id']}/").json()
    assert latest["status"] == "succeeded" and latest["documents_indexed"] == 1
    assert latest["collection"] == "atlas"


def test_replacing_an_upload_deletes_the_old_file(api, atlas, django_capture_on_commit_callbacks):
    from django.core.files.uploadedfile import SimpleUploadedFile

    def upload(text: bytes) -> Document:
        file = SimpleUploadedFile("notes.txt", text, "text/plain")
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post("/api/documents/", {"collection": "atlas", "file": file})
        assert response.status_code in (201, 202), response.json()
        return Document.objects.get(collection__slug="atlas", external_id="notes.txt")

    first = upload(b"North by north.")
    storage, old_name = first.source_file.storage, first.source_file.name
    second = upload(b"East by east.")
    assert second.pk == first.pk and second.source_file.name != old_name
    assert storage.exists(second.source_file.name) and not storage.exists(old_name)
    second.title = "Notes"
    second.save(update_fields=["title"])  # a save that keeps the file leaves it alone
    assert storage.exists(second.source_file.name)


def test_uploads_too_large_or_of_unknown_type(api, atlas, retrieval_settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    picture = SimpleUploadedFile("photo.gif", b"GIF89a", "image/gif")  # no parser reads GIF
    refused = api.post("/api/documents/", {"collection": "atlas", "file": picture})
    assert refused.status_code == 415 and "No parser accepts photo.gif" in refused.json()["detail"]
    retrieval_settings(MAX_UPLOAD_BYTES=10)
    big = SimpleUploadedFile("notes.txt", b"north " * 10, "text/plain")
    too_large = api.post("/api/documents/", {"collection": "atlas", "file": big})
    assert too_large.status_code == 413 and "limit is 10" in too_large.json()["detail"]
    both = api.post(
        "/api/documents/",
        {
            "collection": "atlas",
            "external_id": "x",
            "text": "t",
            "file": SimpleUploadedFile("a.txt", b"a"),
        },
    )
    assert both.status_code == 400
    assert Document.objects.filter(collection__slug="atlas").count() == 2


def test_values_postgresql_cannot_store_are_a_400(api, atlas):
    nul = api.post("/api/search/", {"query": "north", "collection": "at\x00las"}, format="json")
    assert nul.status_code == 400 and "Null characters" in str(nul.json()["collection"])
    assert api.get("/api/documents/", {"collection": "a\x00"}).status_code == 400
