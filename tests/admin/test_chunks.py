"""The chunk browser: full-text search and filters by collection, document and metadata."""

from __future__ import annotations

import pytest
from django.urls import reverse

from retrieval.models import Chunk, Document
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

pytestmark = pytest.mark.django_db

URL = "admin:retrieval_chunk_changelist"


def listed(admin_client, **params) -> set[str]:
    response = admin_client.get(reverse(URL), params)
    assert response.status_code == 200
    return {c.content for c in response.context["cl"].result_list}


def test_search_finds_words_in_chunk_text(admin_client, atlas):
    assert listed(admin_client, q="hill") == {"Up the hill we go."}
    assert listed(admin_client, q="nothing-like-this") == set()
    # Full-text search stems: "hills" and "going" find "Up the hill we go."
    assert listed(admin_client, q="hills going") == {"Up the hill we go."}
    assert listed(admin_client, q="hills -going") == set()


def test_filters_by_collection_document_and_metadata(admin_client, atlas):
    other, _ = get_or_create_collection("other")
    ingest(other, [Source.from_text("North pole.", external_id="pole.txt")])
    hill = Document.objects.get(external_id="hill.txt")
    assert listed(admin_client, collection__id__exact=other.pk) == {"North pole."}
    assert listed(admin_client, document=hill.pk) == {"Up the hill we go."}
    map_chunks = set(
        Chunk.objects.filter(document__external_id="map.txt").values_list("content", flat=True)
    )
    assert listed(admin_client, metadata="lang=en") == map_chunks
    assert listed(admin_client, metadata="year=2020") == {"Up the hill we go."}
    assert listed(admin_client, metadata="year") == {"Up the hill we go."}
    assert listed(admin_client, metadata="lang=fr") == set()


def test_the_document_filter_offers_the_collections_documents(admin_client, atlas):
    other, _ = get_or_create_collection("other")
    ingest(other, [Source.from_text("North pole.", external_id="pole.txt")])
    body = admin_client.get(reverse(URL), {"collection__id__exact": other.pk}).content.decode()
    assert "pole.txt" in body and "hill.txt" not in body.split('id="changelist-filter"')[1]


def test_bad_filter_values_are_not_server_errors(admin_client, atlas):
    for params in ({"document": "abc"}, {"metadata": "=x"}):
        response = admin_client.get(reverse(URL), params)
        assert response.status_code == 302 and "e=1" in response.url


def test_a_chunk_page_links_to_its_place_in_the_document(admin_client, atlas):
    chunk = Chunk.objects.get(content="Up the hill we go.")
    body = admin_client.get(
        reverse("admin:retrieval_chunk_change", args=[chunk.pk])
    ).content.decode()
    target = reverse("admin:retrieval_document_change", args=[chunk.document_id])
    assert f'href="{target}#retrieval-chunk-0"' in body
