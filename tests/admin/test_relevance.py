"""Synonyms, hidden results and blocked suggestions in the admin, within the access policy."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

import retrieval
from retrieval.models import Document, HiddenResult, Synonym
from retrieval.services.access import Scope
from tests.conftest import collection_of, editor

pytestmark = pytest.mark.django_db

SYNONYM = "/admin/retrieval/synonym/add/"
HIDDEN = "/admin/retrieval/hiddenresult/add/"


@pytest.fixture
def two(keyword_settings):
    return (
        collection_of("atlas", {"a1": "the television is north", "b1": "south is down"}),
        collection_of("bestiary", {"a-wolf": "the wolf"}),
    )


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def found(query: str) -> set[str]:
    results = retrieval.search(query, collection="atlas", retriever="bm25", scope=Scope.ALL)
    return {result.chunk.document.external_id for result in results}


def test_a_synonym_saved_in_the_admin_takes_effect_on_the_next_search(two):
    atlas, _ = two
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    assert found("tv") == set()
    data = {"collection": atlas.pk, "active": "on", "note": ""}
    for bad, reason in [
        ("tv", "Give two words or more"),
        ("tv -> the", "is not one searchable word"),
        ("tv -> flat screen", "is not one searchable word"),
    ]:
        refused = client.post(SYNONYM, {**data, "rule": bad})
        assert reason in str(refused.context["adminform"].form.errors), bad
    assert client.post(SYNONYM, {**data, "rule": "  tv   ->  television "}).status_code == 302
    assert Synonym.objects.get().rule == "tv -> television"
    assert found("tv") == {"a1"}
    # A rule of every collection, from whoever may change them all.
    every = {**data, "collection": "", "rule": "boreal, north"}
    assert client.post(SYNONYM, every).status_code == 302
    assert found("boreal") == {"a1"}


def test_staff_who_may_not_change_every_collection_write_no_rule_of_all(two, retrieval_settings):
    atlas, bestiary = two
    retrieval_settings(COLLECTION_ACCESS="tests.admin.test_relevance.bestiary_only")
    Synonym.objects.create(rule="tv -> television")  # every collection's
    Synonym.objects.create(collection=atlas, rule="wolf -> dog")
    client = signed_in(editor("keeper", is_staff=True))
    form = client.get(SYNONYM).context["adminform"].form
    assert list(form.fields["collection"].queryset) == [bestiary]
    assert form.fields["collection"].required
    refused = client.post(SYNONYM, {"collection": "", "rule": "wolf, dog", "active": "on"})
    assert refused.status_code == 200 and "required" in str(
        refused.context["adminform"].form.errors
    )
    listed = client.get(reverse("admin:retrieval_synonym_changelist"))
    assert list(listed.context["cl"].result_list) == []  # neither Atlas's nor every collection's
    ok = client.post(SYNONYM, {"collection": bestiary.pk, "rule": "wolf, dog", "active": "on"})
    assert ok.status_code == 302
    assert Synonym.objects.filter(collection=bestiary).exists()


def test_a_document_is_hidden_for_a_pattern_of_its_own_collection(two):
    atlas, bestiary = two
    client = signed_in(get_user_model().objects.create_superuser("root", password="x"))
    wolf = Document.objects.get(external_id="a-wolf")
    data = {"collection": atlas.pk, "query": "south*", "active": "on", "note": ""}
    refused = client.post(HIDDEN, {**data, "document": wolf.pk})
    assert "is not a document of atlas" in str(refused.context["adminform"].form.errors)
    assert found("south") == {"b1"}
    b1 = Document.objects.get(external_id="b1")
    assert client.post(HIDDEN, {**data, "document": b1.pk}).status_code == 302
    assert HiddenResult.objects.get().pattern == "south%"
    assert found("south") == set()
    assert found("down south") == {"b1"}  # another query


def bestiary_only(user):
    """COLLECTION_ACCESS for these tests: Bestiary alone."""
    from retrieval.models import Collection

    return Collection.objects.filter(name="bestiary")
