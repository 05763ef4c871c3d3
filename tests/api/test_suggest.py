"""Query suggestions: past readers' queries, offered only as far as the reader may see."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone
from rest_framework.test import APIClient

from retrieval.models import BlockedSuggestion, QueryTrace
from tests.api.test_throttles import rates  # noqa: F401  (a fixture)
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

API, PAGE = QueryTrace.Source.API, QueryTrace.Source.PAGE


def without_secret(user):
    """DOCUMENT_ACCESS for these tests: everything but the secret document."""
    return ~Q(external_id="secret")


@pytest.fixture
def atlas(keyword_settings):
    return collection_of("atlas", {"n": "North is up.", "secret": "Plans."})


def member(username: str):
    return get_user_model().objects.create_user(username=username, password="x")


def asked(collection, query: str, *users, source=API, found: int = 3, days: int = 0) -> None:
    for user in users:
        trace = QueryTrace.objects.create(
            collection=collection,
            query=query,
            user=user,
            pipeline="default",
            source=source,
            result_count=found,
        )
        if days:
            QueryTrace.objects.filter(pk=trace.pk).update(
                created_at=timezone.now() - timedelta(days=days)
            )


def suggestions(user, q: str, collection: str = "atlas", **more) -> list[str]:
    client = APIClient()
    client.force_authenticate(user)
    answer = client.get("/api/suggest/", {"q": q, "collection": collection, **more})
    assert answer.status_code == 200, answer.content
    return answer.json()["suggestions"]


def test_queries_many_readers_asked_and_found_something_for(atlas):
    ann, bob, cat, dan = (member(name) for name in ("ann", "bob", "cat", "dan"))
    asked(atlas, "Reset  Password", ann, bob, cat, source=PAGE)
    asked(atlas, "reset password", ann)  # the same query, normalised
    asked(atlas, "reset router", ann, bob)  # two users: not enough
    asked(atlas, "reset vpn", ann, bob, cat, found=0)  # found nothing
    asked(atlas, "reset modem", ann, bob, cat, source=QueryTrace.Source.PLAYGROUND)
    asked(atlas, "reset token", ann, bob, cat, source=QueryTrace.Source.EVALUATION)
    asked(atlas, "reset email", ann, bob, cat, days=365)  # long ago
    asked(atlas, "reset disk", None, None, None, None)  # anonymous: count for nobody
    assert suggestions(dan, "RES") == ["reset password"]
    assert suggestions(dan, "reset p") == ["reset password"]
    assert suggestions(dan, "reset  ") == ["reset password"]
    assert suggestions(dan, "reset pa ") == []  # a space after the word: a whole word
    assert suggestions(dan, "r") == []  # shorter than SUGGEST_MIN_PREFIX
    assert suggestions(dan, "%") == [] and suggestions(dan, "re_et") == []  # taken literally
    # Her own queries too, below the popular ones.
    assert suggestions(ann, "reset") == ["reset password", "reset router"]
    assert suggestions(ann, "reset", limit=1) == ["reset password"]


def test_blocked_queries_are_never_offered(atlas):
    users = [member(name) for name in ("ann", "bob", "cat")]
    asked(atlas, "casino tips", *users)
    asked(atlas, "cash desk", *users)
    assert suggestions(users[0], "cas") == ["cash desk", "casino tips"]
    BlockedSuggestion.objects.create(collection=atlas, query="*CASINO*")
    assert suggestions(users[0], "cas") == ["cash desk"]
    BlockedSuggestion.objects.create(query="cash desk")  # of every collection
    assert suggestions(users[0], "cas") == []


def test_a_reader_with_hidden_documents_is_offered_her_own_queries_only(atlas, retrieval_settings):
    retrieval_settings(DOCUMENT_ACCESS="tests.api.test_suggest.without_secret")
    ann, bob, cat, dan = (member(name) for name in ("ann", "bob", "cat", "dan"))
    asked(atlas, "secret merger plans", ann, bob, cat)
    asked(atlas, "secret santa", dan)
    assert suggestions(dan, "secret") == ["secret santa"]
    root = get_user_model().objects.create_superuser("root", password="x")
    assert suggestions(root, "secret") == ["secret merger plans"]


def test_a_hidden_collection_answers_as_a_missing_one(atlas, retrieval_settings):
    retrieval_settings(COLLECTION_ACCESS="tests.api.test_suggest.no_collection")
    client = APIClient()
    client.force_authenticate(member("ann"))
    hidden = client.get("/api/suggest/", {"q": "north", "collection": "atlas"})
    missing = client.get("/api/suggest/", {"q": "north", "collection": "nowhere"})
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["collection"] == [
        m.replace("nowhere", "atlas") for m in missing.json()["collection"]
    ]
    assert client.get("/api/suggest/", {"collection": "atlas"}).status_code == 400
    bad = client.get("/api/suggest/", {"q": "no", "collection": "nowhere", "limit": 0})
    assert bad.status_code == 400
    assert APIClient().get("/api/suggest/", {"q": "north", "collection": "atlas"}).status_code in (
        401,
        403,
    )


def test_suggestions_are_throttled_under_their_own_scope(atlas, rates):  # noqa: F811
    rates(retrieval_suggest="2/min")
    ann = member("ann")
    client = APIClient()
    client.force_authenticate(ann)
    answers = [client.get("/api/suggest/", {"q": "north", "collection": "atlas"}) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]


def no_collection(user):
    """COLLECTION_ACCESS for these tests: nothing."""
    from retrieval.models import Collection

    return Collection.objects.none()
