"""``POST /api/feedback/``: votes become candidate judgments; hidden collections stay hidden."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
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


def client_for(username: str, *, may_judge: bool = True) -> APIClient:
    """A client of a user who may add judgments (Django's permission), or not."""
    client = APIClient()
    user = get_user_model().objects.create_user(username=username)
    if may_judge:
        user.user_permissions.add(Permission.objects.get(codename="add_judgment"))
    client.force_authenticate(get_user_model().objects.get(pk=user.pk))
    return client


def test_a_vote_is_a_candidate_judgment_in_the_feedback_set(collections):
    atlas, _ = collections
    chunk = Chunk.objects.get(collection=atlas)
    api = client_for("reader")
    body = {"collection": "Atlas", "query": "river", "chunk_id": chunk.pk, "relevant": True}
    answer = api.post("/api/feedback/", body, format="json")
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"eval_set": "Atlas feedback", "target": "river", "grade": 1}
    assert Judgment.objects.get().status == "candidate"
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


def test_a_vote_tells_nothing_of_other_votes_or_reviews(collections):
    """The answer is the vote itself: another user's judged query, its id or its review
    status never show (they did before: the stored judgment's id and status came back)."""
    atlas, _ = collections
    chunk = Chunk.objects.get(collection=atlas)
    body = {"collection": "Atlas", "query": "river", "chunk_id": chunk.pk, "relevant": True}
    first = client_for("first").post("/api/feedback/", body, format="json")
    Judgment.objects.update(status="accepted", grade=3)  # reviewed by an editor
    second = client_for("second").post("/api/feedback/", body, format="json")
    fresh = client_for("third").post(
        "/api/feedback/", {**body, "query": "a query nobody asked"}, format="json"
    )
    assert first.status_code == second.status_code == fresh.status_code == 202
    assert first.json() == second.json() == fresh.json()


def test_voting_needs_the_permission_to_add_judgments(collections):
    atlas, _ = collections
    chunk = Chunk.objects.get(collection=atlas)
    body = {"collection": "Atlas", "query": "river", "chunk_id": chunk.pk, "relevant": True}
    refused = client_for("reader", may_judge=False).post("/api/feedback/", body, format="json")
    assert refused.status_code == 403
    assert not Judgment.objects.exists()
