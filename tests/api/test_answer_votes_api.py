"""``POST /api/feedback/`` with a ``trace_id``: the asker votes on their answer, once.

Only the signed-in user who asked may vote; someone else's answer, an answer in a
collection hidden from the voter, a trace that is a search and not an answer, and an id
that names nothing are refused alike (the same 404 and body).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from retrieval.models import AnswerVote, QueryTrace
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

QUESTION = "What causes the tides?"


@pytest.fixture
def library(keyword_settings, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    collection_of("Atlas", {"tides": "The tides are caused by the gravity of the moon."})


def client_for(username: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.get_or_create(username=username)[0])
    return client


def ask(client: APIClient, **extra) -> int:
    """Ask the question through the API as ``client``'s user; return the answer's trace id."""
    body = {"question": QUESTION, "collection": "Atlas", "extractive": True, **extra}
    response = client.post("/api/answer/", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["trace_id"]


def vote(client: APIClient, trace_id: int, helpful: bool = True, **kwargs):
    return client.post("/api/feedback/", {"trace_id": trace_id, "helpful": helpful}, **kwargs)


def test_the_asker_votes_once_and_a_second_vote_changes_the_first(library):
    asker = client_for("asker")
    trace_id = ask(asker)
    up = vote(asker, trace_id, True, format="json")
    assert up.status_code == 202, up.content
    assert up.json() == {"trace_id": trace_id, "helpful": True}
    down = vote(asker, trace_id, False, format="json")
    assert down.json() == {"trace_id": trace_id, "helpful": False}
    (stored,) = AnswerVote.objects.all()
    assert (stored.trace_id, stored.user.username, stored.helpful) == (trace_id, "asker", False)


def test_a_vote_comes_as_a_form_too(library):
    """The answer box's form posts without JavaScript: a form body, "true" or "false"."""
    asker = client_for("asker")
    trace_id = ask(asker)
    response = asker.post("/api/feedback/", {"trace_id": str(trace_id), "helpful": "false"})
    assert response.status_code == 202
    assert AnswerVote.objects.get().helpful is False


def test_an_answer_the_voter_may_not_vote_on_reads_as_missing(library, retrieval_settings):
    asker, other, bob = client_for("asker"), client_for("other"), client_for("bob")
    answered, bobs = ask(asker), ask(bob)
    searched = asker.post("/api/search/", {"query": "tides", "collection": "Atlas"}, format="json")
    assert searched.status_code == 200
    search_trace = QueryTrace.objects.get(source=QueryTrace.Source.API).pk
    refusals = {
        "a missing id": (other, 10**9),
        "someone else's answer": (other, answered),
        "a search, not an answer": (asker, search_trace),
    }
    responses = {what: vote(client, pk, format="json") for what, (client, pk) in refusals.items()}
    retrieval_settings(COLLECTION_ACCESS="tests.api.access.by_username")  # bob: Bestiary only
    responses["their own answer, now hidden"] = vote(bob, bobs, format="json")
    for what, response in responses.items():
        assert (response.status_code, response.json()) == (
            404,
            {"trace_id": ["No answer of yours has this trace_id."]},
        ), what
    assert not AnswerVote.objects.exists()


def test_voting_needs_a_signed_in_asker_and_a_well_formed_vote(library):
    asker = client_for("asker")
    trace_id = ask(asker)
    assert vote(APIClient(), trace_id, format="json").status_code in (401, 403)
    bad = asker.post("/api/feedback/", {"trace_id": trace_id, "helpful": "maybe"}, format="json")
    assert bad.status_code == 400 and "helpful" in bad.json()
    assert asker.post("/api/feedback/", {"trace_id": "x"}, format="json").status_code == 400
    assert not AnswerVote.objects.exists()
