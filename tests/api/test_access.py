"""COLLECTION_ACCESS: two users who see different collections, on every endpoint."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from rest_framework.test import APIClient

from retrieval.exceptions import CollectionNotFound
from retrieval.models import Chunk, Document, IndexRun
from retrieval.services.access import Scope
from retrieval.services.collections import get_or_create_collection
from retrieval.services.indexing import Source, ingest

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["tests.api.access.by_username", "tests.api.access.as_queryset"])
def hook(request, keyword_settings, retrieval_settings) -> str:
    retrieval_settings(COLLECTION_ACCESS=request.param)
    for name, text in {"Atlas": "North is up.", "Bestiary": "The north dragon."}.items():
        collection, _ = get_or_create_collection(name)
        ingest(collection, [Source.from_text(text, external_id=name.lower())])
    return request.param


def client_for(username: str) -> APIClient:
    client = APIClient()
    user, _ = get_user_model().objects.get_or_create(username=username)
    client.force_authenticate(user)
    return client


def slugs(response) -> list[str]:
    return sorted(item["slug"] for item in response.json()["results"])


def test_each_user_lists_only_their_collections_and_what_is_in_them(hook):
    alice, bob, carol = client_for("alice"), client_for("bob"), client_for("carol")
    assert slugs(alice.get("/api/collections/")) == ["atlas"]
    assert slugs(bob.get("/api/collections/")) == ["bestiary"]
    assert slugs(carol.get("/api/collections/")) == ["atlas", "bestiary"]  # hook said None
    documents = alice.get("/api/documents/").json()["results"]
    assert [d["external_id"] for d in documents] == ["atlas"]
    chunks = alice.get("/api/chunks/").json()["results"]
    assert {c["collection"] for c in chunks} == {"atlas"}
    runs = alice.get("/api/index-runs/").json()["results"]
    assert [r["collection"] for r in runs] == ["atlas"]
    assert bob.get("/api/index-runs/").json()["count"] == 1
    assert carol.get("/api/index-runs/").json()["count"] == 2


def test_a_hidden_collection_reads_exactly_like_a_missing_one(hook):
    alice = client_for("alice")
    dragon = Document.objects.get(external_id="bestiary")
    chunk = Chunk.objects.get(document=dragon)
    run = IndexRun.objects.get(collection__slug="bestiary")
    for url in [
        "/api/collections/bestiary/",
        f"/api/documents/{dragon.pk}/",
        f"/api/chunks/{chunk.pk}/",
        f"/api/index-runs/{run.pk}/",
    ]:
        assert alice.get(url).status_code == 404, url
    assert alice.delete(f"/api/documents/{dragon.pk}/").status_code == 404
    assert alice.patch("/api/collections/bestiary/", {"description": "x"}).status_code == 404
    assert alice.delete("/api/collections/bestiary/").status_code == 404
    assert Document.objects.filter(pk=dragon.pk).exists()

    hidden = {"query": "north", "collection": "bestiary"}
    missing = {"query": "north", "collection": "nowhere"}
    for url, extra in [("/api/search/", {}), ("/api/search/batch/", {"queries": ["north"]})]:
        refused = alice.post(url, {**hidden, **extra}, format="json")
        absent = alice.post(url, {**missing, **extra}, format="json")
        assert refused.status_code == absent.status_code == 404
        assert refused.json() == {"collection": ["No collection 'bestiary'."]}
        assert absent.json() == {"collection": ["No collection 'nowhere'."]}
    assert alice.get("/api/tools/", {"collection": "bestiary"}).status_code == 404
    call = {"collection": "bestiary", "name": "retrieve", "arguments": {"query": "north"}}
    assert alice.post("/api/tools/call/", call, format="json").status_code == 404

    upload = {"collection": "bestiary", "external_id": "egg", "text": "An egg."}
    refused = alice.post("/api/documents/", upload, format="json")
    absent = alice.post("/api/documents/", {**upload, "collection": "nowhere"}, format="json")
    assert refused.status_code == absent.status_code == 400
    assert refused.json()["collection"] == [
        absent.json()["collection"][0].replace("nowhere", "bestiary")
    ]
    assert not Document.objects.filter(external_id="egg").exists()


def test_visible_collections_search_normally(hook):
    bob = client_for("bob")
    found = bob.post("/api/search/", {"query": "dragon", "collection": "bestiary"}, format="json")
    assert found.status_code == 200 and found.json()["results"][0]["document"] == "bestiary"


def test_the_service_lookups_apply_the_hook(hook):
    alice = get_user_model().objects.create(username="alice")
    scope = Scope.for_user(alice)
    assert [c.slug for c in scope.visible_collections()] == ["atlas"]
    assert scope.collection("Atlas").slug == "atlas"
    with pytest.raises(CollectionNotFound, match="No collection 'Bestiary'."):
        scope.collection("Bestiary")


def test_without_a_hook_everyone_sees_everything(keyword_settings):
    get_or_create_collection("Atlas")
    assert slugs(client_for("alice").get("/api/collections/")) == ["atlas"]
    get_or_create_collection("Bestiary")
    assert slugs(client_for("alice").get("/api/collections/")) == ["atlas", "bestiary"]


def test_a_hook_returning_another_model_names_the_mistake(keyword_settings, retrieval_settings):
    from retrieval.exceptions import InvalidComponentError

    retrieval_settings(COLLECTION_ACCESS="tests.api.access.wrong_model")
    with pytest.raises(InvalidComponentError, match="queryset of Document, not of Collection"):
        Scope.for_user(AnonymousUser())
