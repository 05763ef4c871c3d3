"""Promoted results: pinned documents first on every face, within the scope and the filters."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse
from rest_framework.test import APIClient

import retrieval
from retrieval.models import Document, Promotion, QueryTrace
from retrieval.services.access import Scope
from retrieval.services.query.packing import pack_context
from retrieval.services.tools import collection_tools
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

TEXTS = {
    "river": "the river runs north",
    "sun": "the sun rises east",
    "hill": "up the hill",
    "policy": "Leave policy. Ask your manager two weeks ahead.",
}


def public_only(user):
    """DOCUMENT_ACCESS for these tests: everything but the leave policy."""
    return ~Q(external_id="policy")


@pytest.fixture
def atlas(keyword_settings):
    return collection_of("atlas", TEXTS)


def pin(collection, query: str, external_id: str, **fields) -> Promotion:
    document = Document.objects.get(collection=collection, external_id=external_id)
    return Promotion.objects.create(collection=collection, query=query, document=document, **fields)


def ids(results) -> list[str]:
    return [result.chunk.document.external_id for result in results]


def search(query: str, **options):
    options.setdefault("scope", Scope.ALL)
    return retrieval.search(query, collection="atlas", retriever="bm25", **options)


def test_a_pinned_document_comes_first_marked_and_traced(atlas):
    assert ids(search("river north")) == ["river"]  # the policy shares no word with it
    promotion = pin(atlas, "river north", "policy")
    results = search("river north", top_k=2)
    assert ids(results) == ["policy", "river"]
    first, second = results
    assert first.score == 1.0 and first.rank == 0 and second.rank == 1
    assert first.metadata["promoted"] is True and first.metadata["promotion_id"] == promotion.pk
    assert "retrieved_score" not in first.metadata  # not found by the search itself
    assert first.chunk.index == 0  # the document's first chunk
    assert "promoted" not in second.metadata
    event = next(e for e in results.trace["events"] if e["stage"] == "promoted")
    assert event["results"] == [
        {
            "promotion_id": promotion.pk,
            "document_id": first.chunk.document_id,
            "chunk_id": first.chunk_id,
            "retrieved_rank": None,
        }
    ]
    assert ids(search("river north", top_k=1)) == ["policy"]  # top_k still bounds the list
    # A packed context takes the promoted passage first.
    packed = pack_context(results, max_tokens=200)
    assert packed.citations[0].external_id == "policy"


def test_a_found_document_moves_up_once_with_its_retrieved_score(atlas):
    before = search("the river runs north up the hill")
    assert ids(before)[:2] == ["river", "hill"]
    pin(atlas, "the river runs north up the hill", "hill")
    after = search("the river runs north up the hill")
    assert ids(after) == ["hill", "river", *ids(before)[2:]]
    assert after[0].chunk_id == before[1].chunk_id  # its best chunk among the results
    assert after[0].metadata["retrieved_score"] == before[1].score
    assert after[0].metadata["retrieved_rank"] == 2


def test_patterns_ignore_case_and_spacing_and_star_stands_for_any_text(atlas):
    pin(atlas, "Leave*", "policy")
    pin(atlas, "how do i * the  hill", "hill")
    pin(atlas, "100%_sure", "sun")
    assert ids(search("  LEAVE   days"))[:1] == ["policy"]
    assert ids(search("leave"))[:1] == ["policy"]
    assert not search("on leave")[0].metadata.get("promoted")  # the pattern starts the query
    assert ids(search("How do I climb   the hill"))[:1] == ["hill"]
    assert ids(search("100%_sure"))[:1] == ["sun"]
    assert "sun" not in ids(search("100xxsure"))  # % and _ are literal, only * is a wildcard


def test_order_follows_positions_and_inactive_or_foreign_promotions_do_nothing(atlas):
    other = collection_of("bestiary", {"wolf": "the wolf runs north"})
    pin(atlas, "north*", "sun", position=2)
    pin(atlas, "north*", "hill", position=1)
    pin(atlas, "north*", "policy", active=False)
    Promotion.objects.create(
        collection=other, query="north*", document=other.documents.get(external_id="wolf")
    )
    assert ids(search("north river"))[:3] == ["hill", "sun", "river"]
    assert "policy" not in ids(search("north river"))


def test_a_hidden_or_filtered_out_promoted_document_is_never_shown(atlas, retrieval_settings):
    pin(atlas, "river*", "policy")
    pin(atlas, "river*", "sun", position=2)
    retrieval_settings(DOCUMENT_ACCESS="tests.services.query.test_promotions.public_only")
    reader = get_user_model().objects.create_user("reader")
    results = search("river north", user=reader, scope=None)
    assert ids(results) == ["sun", "river"]
    shown = json.dumps(results.trace)
    policy = Document.objects.get(external_id="policy")
    assert f'"document_id": {policy.pk}' not in shown
    # Filters apply to promoted documents too.
    filtered = search("river north", filters={"document_ids": [policy.pk]})
    assert ids(filtered) == ["policy"]
    only_sun = search("river north", filters={"documents": ["sun", "river"]})
    assert ids(only_sun) == ["sun", "river"]


def test_every_face_shows_and_records_the_promotion(atlas, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    pin(atlas, "river north", "policy")
    user = get_user_model().objects.create_user("reader", is_staff=True, is_superuser=True)
    client = APIClient()
    client.force_authenticate(user)
    body = {"query": "river north", "collection": "atlas", "retriever": "bm25"}
    answer = client.post("/api/search/", body, format="json").json()
    assert answer["results"][0]["document"] == "policy"
    assert answer["results"][0]["metadata"]["promoted"] is True
    tool = collection_tools("atlas", user=user)[0]
    told = json.loads(tool.execute({"query": "river north", "top_k": 2}))
    assert told["results"][0]["document"] == "policy" and told["results"][0]["promoted"] is True
    assert "promoted" not in told["results"][1]
    browser = client_for(user)
    page = browser.get(reverse("retrieval:search"), {"collection": "atlas", "q": "river north"})
    assert 'class="retrieval-promoted"' in page.content.decode()
    asked = {"collection": atlas.pk, "query": "river north", "left": "bm25", "right": "dense"}
    playground = browser.get(reverse("admin:retrieval_playground"), {**asked, "top_k": 5})
    assert playground.content.decode().count('class="retrieval-promoted"') == 2
    traces = QueryTrace.objects.filter(query="river north")
    assert traces.count() == 5  # API, tool, search page, playground's two sides
    for trace in traces:
        assert trace.results[0]["promoted"] is True, trace.pipeline
        assert any(e["stage"] == "promoted" for e in trace.trace["events"]), trace.pipeline


def client_for(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client
