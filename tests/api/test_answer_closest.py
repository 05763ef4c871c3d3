"""An answer that abstains lists the closest documents, linked as the search page links
them, in its JSON and in its streamed ``answer`` event alike."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from retrieval.models import Document
from retrieval.services.results.page import document_url
from tests.api.test_answer_api import events
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

# Nothing scores 1000: retrieval finds the tides, and the answer abstains.
BODY = {"question": "What causes the tides?", "collection": "library", "min_score": 1000}


@pytest.fixture
def api(keyword_settings) -> APIClient:
    collection_of("library", {"tides": "The tides are caused by the gravity of the moon."})
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user(username="reader"))
    return client


def test_an_abstention_lists_the_closest_documents_linked_streamed_or_not(api):
    tides = Document.objects.get(external_id="tides")
    expected = [{"title": tides.title, "url": document_url(tides)}]
    assert document_url(tides)  # the app's document page: the metadata has no url
    plain = api.post("/api/answer/", BODY, format="json").json()
    streamed = events(api.post("/api/answer/", {**BODY, "stream": True}, format="json"))
    kind, final = streamed[-1]
    assert kind == "answer"
    for body in (plain, final):
        assert body["abstained"] and body["mode"] == "retrieval"
        assert [item["document"] for item in body["closest"]] == ["tides"]
        assert body["closest_sources"] == expected
