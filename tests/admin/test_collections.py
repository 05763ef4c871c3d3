"""Collections created in the admin take their embedder's dimensions; the reindex action."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
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


def test_reindex_action_indexes_every_document_again(admin_client, atlas):
    Chunk.objects.all().delete()
    response = admin_client.post(
        reverse("admin:retrieval_collection_changelist"),
        {"action": "reindex_collections", ACTION_CHECKBOX_NAME: [atlas.pk]},
        follow=True,
    )
    assert "2 indexed, 0 skipped, 0 failed" in response.content.decode()
    assert Chunk.objects.filter(collection=atlas).count() >= 2
    assert IndexRun.objects.count() == 2


def test_the_changelist_links_to_the_playground(admin_client, atlas):
    body = admin_client.get(reverse("admin:retrieval_collection_changelist")).content.decode()
    assert reverse("admin:retrieval_playground") in body
