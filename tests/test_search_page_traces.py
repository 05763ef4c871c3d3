"""A search another site's page makes a visitor's browser run is answered, not traced."""

from __future__ import annotations

import pytest

from retrieval.models import QueryTrace
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader_client(client, django_user_model, keyword_settings, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    collection_of("atlas", {"birds.txt": "Penguins live in Antarctica."})
    client.force_login(django_user_model.objects.create_user(username="reader"))
    return client


@pytest.mark.parametrize(
    ("headers", "traced"),
    [
        ({"HTTP_SEC_FETCH_SITE": "same-origin"}, True),
        ({"HTTP_SEC_FETCH_SITE": "none"}, True),  # typed in the address bar, a bookmark
        ({}, True),  # no browser headers: a script of the site's own
        ({"HTTP_REFERER": "http://testserver/?q=x"}, True),
        ({"HTTP_SEC_FETCH_SITE": "cross-site"}, False),
        ({"HTTP_SEC_FETCH_SITE": "same-site"}, False),  # another subdomain is another site
        ({"HTTP_REFERER": "https://elsewhere.example/page"}, False),
    ],
)
def test_only_the_sites_own_searches_are_traced(reader_client, headers, traced):
    response = reader_client.get("/", {"q": "penguins", "collection": "atlas"}, **headers)
    assert response.status_code == 200
    assert [r.best.chunk.content for r in response.context["results"]] == [
        "Penguins live in Antarctica."
    ]
    assert QueryTrace.objects.filter(query="penguins").exists() is traced
