"""Hidden results: a document left out for a query pattern, on the next search, every face."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q
from rest_framework.test import APIClient

import retrieval
from retrieval.models import Document, HiddenResult, Promotion
from retrieval.services.access import Scope
from retrieval.services.tools import collection_tools
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

TEXTS = {
    "river": "the river runs north",
    "delta": "the river delta lies south",
    "sun": "the sun rises east over the river",
    "policy": "Leave policy by the river. Ask your manager two weeks ahead.",
}


def public_only(user):
    """DOCUMENT_ACCESS for these tests: everything but the leave policy."""
    return ~Q(external_id="policy")


@pytest.fixture
def atlas(keyword_settings):
    return collection_of("atlas", TEXTS)


def hide(collection, query: str, external_id: str, **fields) -> HiddenResult:
    document = Document.objects.get(collection=collection, external_id=external_id)
    return HiddenResult.objects.create(
        collection=collection, query=query, document=document, **fields
    )


def ids(results) -> list[str]:
    return [result.chunk.document.external_id for result in results]


def search(query: str, **options):
    options.setdefault("scope", Scope.ALL)
    return retrieval.search(query, collection="atlas", retriever="bm25", **options)


def test_a_hidden_document_is_left_out_for_matching_queries_only(atlas):
    assert "river" in ids(search("river north"))
    rule = hide(atlas, "River  *", "river")
    results = search("river north", top_k=10)
    assert "river" not in ids(results)
    assert [r.rank for r in results] == list(range(len(results)))
    (event,) = [e for e in results.trace["events"] if e["stage"] == "hidden"]
    river = Document.objects.get(external_id="river")
    assert [(e["hidden_id"], e["document_id"]) for e in event["results"]] == [(rule.pk, river.pk)]
    assert "river" in ids(search("north river"))  # another query: still found
    assert "river" in ids(search("north river", top_k=1))
    rule.active = False
    rule.save()
    assert "river" in ids(search("river north"))


def test_the_reader_still_gets_top_k_results(atlas):
    assert len(search("river", top_k=3)) == 3
    hide(atlas, "river", ids(search("river", top_k=1))[0])
    assert len(search("river", top_k=3)) == 3


def test_hiding_comes_after_promotions(atlas):
    Promotion.objects.create(
        collection=atlas, query="river*", document=Document.objects.get(external_id="sun")
    )
    assert ids(search("river north"))[0] == "sun"
    hide(atlas, "river*", "sun")
    assert "sun" not in ids(search("river north"))


def test_a_rule_on_a_document_the_reader_cannot_see_names_nothing(atlas, retrieval_settings):
    hide(atlas, "river*", "policy")
    retrieval_settings(DOCUMENT_ACCESS="tests.services.query.test_hiding.public_only")
    reader = get_user_model().objects.create_user("reader")
    results = search("river", user=reader, scope=None)
    assert "policy" not in ids(results)
    shown = json.dumps(results.trace)
    assert '"hidden"' not in shown
    assert f'"document_id": {Document.objects.get(external_id="policy").pk}' not in shown


def test_every_face_applies_the_rule(atlas, retrieval_settings):
    hide(atlas, "river north", "river")
    user = get_user_model().objects.create_user("root", is_staff=True, is_superuser=True)
    client = APIClient()
    client.force_authenticate(user)
    body = {"query": "river north", "collection": "atlas", "retriever": "bm25"}
    answer = client.post("/api/search/", body, format="json").json()
    assert "river" not in [result["document"] for result in answer["results"]]
    tool = collection_tools("atlas", user=user)[0]
    told = json.loads(tool.execute({"query": "river north", "top_k": 3}))
    assert "river" not in [result["document"] for result in told["results"]]
