"""The admin collection page on an external index: backend, pending operations, last
error, and the rebuild action (Chroma, started by the tests)."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from retrieval.models import Collection, IndexOperation
from retrieval.services.indexes import outbox, sync
from retrieval.testing.indexes import make_collection
from tests.services.indexes.conftest import BACKENDS, engine_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def chroma(engines, tmp_path_factory, keyword_settings, retrieval_settings):
    engine = engine_for(engines, "chroma", tmp_path_factory)
    retrieval_settings(INDEXES={"ext": {"BACKEND": BACKENDS["chroma"], "OPTIONS": engine.options}})
    return engine


def test_a_new_collection_can_be_put_on_an_external_index(admin_client, chroma):
    response = admin_client.post(
        reverse("admin:retrieval_collection_add"),
        {"name": "Maps", "slug": "maps", "embedder": "default", "index": "ext", "metadata": "{}"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    collection = Collection.objects.get(slug="maps")
    assert (collection.index, collection.external_index) == ("ext", True)
    page = admin_client.get(reverse("admin:retrieval_collection_change", args=[collection.pk]))
    body = page.content.decode()
    assert "ChromaIndex (external" in body and "0 pending operations" in body
    assert 'name="index"' not in body  # fixed once the collection exists


def test_the_page_shows_pending_operations_and_the_last_error(admin_client, chroma):
    collection = make_collection("compass", "ext")
    IndexOperation.objects.create(
        collection_id=collection.pk,
        index="ext",
        kind="delete",
        chunk_ids=[1],
        attempts=2,
        last_error="ConnectionError: refused",
    )
    page = admin_client.get(reverse("admin:retrieval_collection_change", args=[collection.pk]))
    body = page.content.decode()
    assert "1 pending operations" in body and "ConnectionError: refused" in body


def test_the_rebuild_action_builds_a_new_space(admin_client, chroma):
    collection = make_collection("compass", "ext")
    before = collection.index_space
    response = admin_client.post(
        reverse("admin:retrieval_collection_changelist"),
        {"action": "rebuild_indexes", ACTION_CHECKBOX_NAME: [collection.pk]},
        follow=True,
    )
    assert "rebuild of index &#x27;ext&#x27; queued" in response.content.decode()
    assert outbox.drain().applied == 1  # on commit, on a worker or inline
    collection.refresh_from_db()
    assert collection.index_space != before and not sync.compare(collection)
