"""``POST /api/feedback/``: votes become candidate judgments; hidden collections stay hidden."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from retrieval.models import Chunk, EvalSet, Judgment
from retrieval.services.goldens import qrels
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def collections(keyword_settings):
    return collection_of("Atlas", {"river": "the river runs north"}), collection_of(
        "Bestiary", {"wolf": "the wolf runs east"}
    )


def client_for(username: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user(username=username))
    return client


def test_a_vote_is_a_candidate_judgment_in_the_feedback_set(collections):
    atlas, _ = collections
    chunk = Chunk.objects.get(collection=atlas)
    api = client_for("reader")
    body = {"collection": "Atlas", "query": "river", "chunk_id": chunk.pk, "relevant": True}
    answer = api.post("/api/feedback/", body, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json() == {
        "id": Judgment.objects.get().pk,
        "eval_set": "Atlas feedback",
        "query_id": "q1",
        "target": "river",
        "grade": 1,
        "status": "candidate",
    }
    feedback = EvalSet.objects.get(name="Atlas feedback")
    assert qrels(feedback) == {}  # not counted until accepted
    down = api.post("/api/feedback/", {**body, "relevant": False}, format="json").json()
    assert down["grade"] == 0 and Judgment.objects.count() == 1  # the latest vote stands
    Judgment.objects.update(status="accepted")
    api.post("/api/feedback/", body, format="json")
    assert qrels(feedback) == {"q1": {"river": 0}}  # a vote never overrides a reviewed one


def test_bad_votes_are_4xx_and_hidden_collections_look_missing(collections, retrieval_settings):
    atlas, bestiary = collections
    wolf = Chunk.objects.get(collection=bestiary)
    api = client_for("reader")
    body = {"collection": "Atlas", "query": "river", "chunk_id": wolf.pk, "relevant": True}
    wrong = api.post("/api/feedback/", body, format="json")
    assert wrong.status_code == 404 and "No chunk" in wrong.json()["chunk_id"][0]
    no_set = api.post(
        "/api/feedback/",
        {**body, "chunk_id": Chunk.objects.get(collection=atlas).pk, "eval_set": "ghost"},
        format="json",
    )
    assert no_set.status_code == 404
    assert api.post("/api/feedback/", {"collection": "Atlas"}, format="json").status_code == 400
    retrieval_settings(COLLECTION_ACCESS="tests.api.access.by_username")
    hidden = client_for("alice").post(
        "/api/feedback/", {**body, "collection": "Bestiary"}, format="json"
    )
    missing = client_for("carol").post(
        "/api/feedback/", {**body, "collection": "Nowhere"}, format="json"
    )
    assert hidden.status_code == missing.status_code == 404
    assert not Judgment.objects.exists()
    assert APIClient().post("/api/feedback/", body, format="json").status_code in (401, 403)
