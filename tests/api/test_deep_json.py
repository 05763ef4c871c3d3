"""JSON nested too deep is a 400 naming MAX_JSON_DEPTH, never stored, never a 500.

Issue 30: metadata nested 900 deep was stored and then broke its admin pages; bodies
nested 5,000 deep, and tool arguments, made the JSON parser raise RecursionError.
"""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

import retrieval
from retrieval.exceptions import InvalidFilterError
from retrieval.models import Chunk, Document
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexing import Source, ingest
from tests.conftest import editor

pytestmark = pytest.mark.django_db


def nested(levels: int) -> dict:
    """Return ``{"a": {"a": ... {"a": 1}}}``, ``levels`` objects deep."""
    value: object = 1
    for _ in range(levels):
        value = {"a": value}
    return value  # type: ignore[return-value]


def nested_text(levels: int) -> str:
    """JSON text nested ``levels`` arrays deep, built without recursing."""
    return "[" * levels + "]" * levels


@pytest.fixture
def api(keyword_settings) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor("reader"))
    return client


@pytest.fixture
def atlas(keyword_settings):
    collection, _ = get_or_create_collection("atlas")
    ingest(collection, [Source.from_text("North is up on the map.", external_id="n")])
    return collection


def test_metadata_nested_past_the_limit_is_refused_everywhere(api, atlas, retrieval_settings):
    retrieval_settings(MAX_JSON_DEPTH=3)
    json_body = api.post(
        "/api/documents/",
        {"collection": "atlas", "external_id": "deep", "text": "x", "metadata": nested(900)},
        format="json",
    )
    assert json_body.status_code == 400
    assert "deeper than 5 levels (MAX_JSON_DEPTH is 3)" in json_body.json()["detail"]
    upload = api.post(
        "/api/documents/",
        {
            "collection": "atlas",
            "file": SimpleUploadedFile("deep.txt", b"north", "text/plain"),
            "metadata": json.dumps(nested(4)),
        },
    )
    assert upload.status_code == 400
    assert "metadata nests objects and arrays deeper than 3 levels" in upload.json()["metadata"][0]
    collection = api.patch("/api/collections/atlas/", {"metadata": nested(4)}, format="json")
    assert collection.status_code == 400 and "MAX_JSON_DEPTH" in str(collection.json())
    assert not Document.objects.filter(external_id__in=["deep", "deep.txt"]).exists()
    patched = api.patch("/api/collections/atlas/", {"metadata": nested(3)}, format="json")
    assert patched.status_code == 200

    run = ingest(atlas, [Source.from_text("x", external_id="python", metadata=nested(4))])
    assert run.documents_failed == 1 and "MAX_JSON_DEPTH is 3" in run.errors[0]["error"]
    with pytest.raises(ValidationError, match="MAX_JSON_DEPTH"):
        Document(collection=atlas, external_id="form", metadata=nested(4)).full_clean()


def test_bodies_and_json_fields_nested_beyond_the_parser_are_a_400(api, atlas):
    deep = nested_text(5000)
    body = api.post("/api/search/", deep, content_type="application/json")
    assert body.status_code == 400 and "MAX_JSON_DEPTH" in body.json()["detail"]
    as_form = api.post("/api/search/", {"query": "north", "collection": "atlas", "filters": deep})
    assert as_form.status_code == 400 and "MAX_JSON_DEPTH" in as_form.json()["filters"][0]
    listed = api.get("/api/documents/", {"metadata": deep})
    assert listed.status_code == 400 and "recursion depth" in listed.json()["metadata"][0]
    listed = api.get("/api/documents/", {"metadata": json.dumps(nested(30))})
    assert listed.status_code == 400 and "MAX_JSON_DEPTH" in listed.json()["metadata"][0]


def test_search_filters_nested_past_the_limit_are_refused(api, atlas, retrieval_settings):
    retrieval_settings(MAX_JSON_DEPTH=3)
    with pytest.raises(InvalidFilterError, match="filters.metadata nests .* deeper than 3"):
        retrieval.search(
            "north", collection=atlas, scope=retrieval.Scope.ALL, filters={"metadata": nested(4)}
        )
    answer = api.post(
        "/api/search/",
        {"query": "north", "collection": "atlas", "filters": {"metadata": nested(3)}},
        format="json",
    )
    assert answer.status_code == 200, answer.json()


def test_tool_arguments_nested_too_deep_are_a_tool_error(api, atlas):
    call = {"collection": "atlas", "name": "retrieve", "arguments": nested_text(5000)}
    answer = api.post("/api/tools/call/", call, format="json")
    assert answer.status_code == 200 and "MAX_JSON_DEPTH" in answer.json()["error"]


def test_admin_pages_show_metadata_stored_before_the_limit(admin_client, atlas):
    # Rows written before MAX_JSON_DEPTH existed: updated in SQL, past every validator.
    Document.objects.filter(external_id="n").update(metadata=nested(900))
    Chunk.objects.filter(document__external_id="n").update(metadata=nested(900))
    document = Document.objects.get(external_id="n")
    page = admin_client.get(reverse("admin:retrieval_document_change", args=[document.pk]))
    assert page.status_code == 200 and "nested deeper than this, not shown" in page.content.decode()
    chunk = document.chunks.get()
    page = admin_client.get(reverse("admin:retrieval_chunk_change", args=[chunk.pk]))
    assert page.status_code == 200 and "nested deeper than this, not shown" in page.content.decode()
