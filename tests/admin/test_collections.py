"""Collections created in the admin take their embedder's dimensions; the reindex action."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from retrieval.models import Chunk, Collection, IndexRun

pytestmark = pytest.mark.django_db


def test_adding_a_collection_records_its_embedding_space(admin_client, keyword_settings):
    response = admin_client.post(
        reverse("admin:retrieval_collection_add"),
        {
            "name": "Maps",
            "slug": "maps",
            "embedder": "default",
            "chunker": "",
            "default_retriever": "bm25",
            "metadata": "{}",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    collection = Collection.objects.get(slug="maps")
    assert (collection.model_name, collection.dimensions) == ("keywords", 3)
    assert collection.default_retriever == "bm25"


def test_an_unknown_embedder_is_a_form_error(admin_client, keyword_settings):
    response = admin_client.post(
        reverse("admin:retrieval_collection_add"),
        {"name": "Maps", "slug": "maps", "embedder": "nope", "metadata": "{}"},
    )
    assert response.status_code == 200 and not Collection.objects.exists()


def test_metadata_holding_a_nul_is_a_form_error(admin_client, keyword_settings):
    response = admin_client.post(
        reverse("admin:retrieval_collection_add"),
        {"name": "Maps", "slug": "maps", "embedder": "default", "metadata": '{"k": "v\\u0000"}'},
    )
    assert response.status_code == 200 and not Collection.objects.exists()
    assert "metadata.k contains a NUL character" in response.content.decode()


def test_reindex_action_asks_then_indexes_every_document_again(admin_client, atlas):
    Chunk.objects.all().delete()
    chosen = {"action": "reindex_collections", ACTION_CHECKBOX_NAME: [atlas.pk]}
    url = reverse("admin:retrieval_collection_changelist")
    asked = admin_client.post(url, chosen)
    said = " ".join(asked.content.decode().split())
    assert asked.status_code == 200 and "its chunks are replaced" in said
    assert "Knowledge graph" not in said  # atlas has none
    assert not IndexRun.objects.filter(task="reindex_collection").exists()
    response = admin_client.post(url, {**chosen, "confirm": "yes"}, follow=True)
    assert "2 indexed, 0 skipped, 0 failed" in response.content.decode()
    assert Chunk.objects.filter(collection=atlas).count() >= 2
    assert IndexRun.objects.count() == 2


def test_the_changelist_links_to_the_playground(admin_client, atlas):
    body = admin_client.get(reverse("admin:retrieval_collection_changelist")).content.decode()
    assert reverse("admin:retrieval_playground") in body


def test_reembed_action_asks_for_the_embedder_then_switches_the_space(
    admin_client, atlas, retrieval_settings
):
    wide = {
        "BACKEND": "retrieval.testing.KeywordEmbedder",
        "OPTIONS": {"keywords": ["north", "east", "up", "hill", "river"], "model": "wide"},
    }
    retrieval_settings(EMBEDDERS={"wide": wide})
    url = reverse("admin:retrieval_collection_changelist")
    chosen = {"action": "reembed_collections", ACTION_CHECKBOX_NAME: [atlas.pk]}
    page = admin_client.post(url, chosen)
    assert page.status_code == 200 and 'name="embedder"' in page.content.decode()
    atlas.refresh_from_db()
    assert atlas.dimensions == 3  # nothing happens before the embedder is chosen
    refused = admin_client.post(url, {**chosen, "apply": "1", "embedder": "nope"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    done = admin_client.post(url, {**chosen, "apply": "1", "embedder": "wide"}, follow=True)
    assert "re-embedding with &#x27;wide&#x27;" in done.content.decode()
    atlas.refresh_from_db()
    assert (atlas.embedder, atlas.dimensions) == ("wide", 5)
    run = IndexRun.objects.latest("pk")
    assert run.status == IndexRun.Status.SUCCEEDED and run.chunks_written == Chunk.objects.count()


def test_extract_graph_action_runs_the_configured_extractor(admin_client, atlas, graph_settings):
    response = admin_client.post(
        reverse("admin:retrieval_collection_changelist"),
        {"action": "extract_graphs", ACTION_CHECKBOX_NAME: [atlas.pk]},
        follow=True,
    )
    run = IndexRun.objects.latest("pk")
    assert f"graph extraction, index run #{run.pk} succeeded" in response.content.decode()
    assert run.task == "extract_graph" and run.documents_done == Chunk.objects.count()
    assert graph_settings.seen  # the extractor read the chunks


def test_an_editor_who_may_not_rename_sees_the_change_page_with_name_and_slug_read_only(
    client, atlas
):
    # May change collections but not add them, so may not rename them (the slug is read-only).
    editor = get_user_model().objects.create_user(username="editor", password="x", is_staff=True)
    editor.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="retrieval", codename__in=["change_collection"]
        )
    )
    client.force_login(editor)
    url = reverse("admin:retrieval_collection_change", args=[atlas.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert 'name="slug"' not in page.content.decode() and "atlas" in page.content.decode()
    saved = client.post(
        url, {"name": "Renamed", "slug": "renamed", "description": "Maps.", "metadata": "{}"}
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    atlas.refresh_from_db()
    assert (atlas.name, atlas.slug, atlas.description) == ("atlas", "atlas", "Maps.")
