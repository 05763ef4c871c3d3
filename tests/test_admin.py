"""Django's admin pages for the app's models render for a superuser (real database)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from retrieval.models import Chunk, Document, IndexRun
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

pytestmark = pytest.mark.django_db


@pytest.fixture
def indexed(keyword_settings):
    collection, _ = get_or_create_collection("atlas")
    ingest(collection, [Source.from_text("North is up.\n\nEast is right.", external_id="map.txt")])
    return collection


def test_every_changelist_and_a_chunk_page_render(admin_client, indexed):
    for model in ("collection", "document", "chunk", "triple", "indexrun"):
        response = admin_client.get(reverse(f"admin:retrieval_{model}_changelist"))
        assert response.status_code == 200, model
    chunk = Chunk.objects.first()
    page = admin_client.get(reverse("admin:retrieval_chunk_change", args=[chunk.pk]))
    assert page.status_code == 200 and "North is up." in page.content.decode()


def test_system_written_records_are_read_only(admin_client, indexed):
    chunk = Chunk.objects.first()
    response = admin_client.post(
        reverse("admin:retrieval_chunk_change", args=[chunk.pk]), {"content": "edited"}
    )
    assert response.status_code == 403
    assert Chunk.objects.get(pk=chunk.pk).content != "edited"
    assert admin_client.get(reverse("admin:retrieval_indexrun_add")).status_code == 403
    assert IndexRun.objects.count() == 1


def test_search_page_lists_results(client, django_user_model, indexed):
    client.force_login(django_user_model.objects.create_user(username="reader", password="x"))
    response = client.get(reverse("retrieval:search"), {"q": "north", "collection": "atlas"})
    assert response.status_code == 200
    body = response.content.decode()
    assert ">North is up.</a>" in body and "East is right." in body
    missing = client.get(reverse("retrieval:search"), {"q": "north", "collection": "nowhere"})
    assert (
        missing.status_code == 200
        and "No collection &#x27;nowhere&#x27;." in missing.content.decode()
    )
    assert Document.objects.count() == 1


def test_search_page_requires_login_unless_made_public(client, indexed, retrieval_settings):
    response = client.get(reverse("retrieval:search"), {"q": "north", "collection": "atlas"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")
    retrieval_settings(SEARCH_PAGE_PUBLIC=True)
    public = client.get(reverse("retrieval:search"), {"q": "north", "collection": "atlas"})
    assert public.status_code == 200 and ">North is up.</a>" in public.content.decode()
