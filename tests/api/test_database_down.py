"""While the database restarts or fails over, the API answers 503 with Retry-After, not 500."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from tests.support.processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)


def cut_off(db_connection) -> None:
    """End the server side of ``db_connection``, as a restart of PostgreSQL does."""
    db_connection.ensure_connection()
    pid = db_connection.connection.info.backend_pid
    with psycopg.connect(database_url(db_connection.settings_dict), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/api/collections/", None),
        ("post", "/api/search/", {"collection": "atlas", "query": "north"}),
    ],
)
def test_a_request_the_database_drops_is_a_503_to_retry(
    client, django_user_model, keyword_settings, method, path, body
):
    from tests.conftest import collection_of

    collection_of("atlas", {"n": "North is up."})
    client.force_login(django_user_model.objects.create_user(username="reader"))
    cut_off(connection)
    response = getattr(client, method)(path, body, content_type="application/json")
    assert response.status_code == 503, response.content
    assert response.json()["detail"] == "The database did not answer. Try again shortly."
    assert response["Retry-After"] == "5"
    # At the end of a request Django closes a connection that failed (the test client
    # skips that); the next request then has a new one and is answered.
    connection.close_if_unusable_or_obsolete()
    assert getattr(client, method)(path, body, content_type="application/json").status_code == 200


def test_a_search_whose_connection_is_lost_in_the_bm25_pipeline_is_a_503(
    client, django_user_model, keyword_settings, retrieval_settings
):
    """The connection ends while the BM25 leg's query waits in psycopg's pipeline and the
    dense leg's query is embedded: leaving the pipeline raised psycopg's own error, which
    no handler knew (the load bench's PostgreSQL restart: a 500)."""
    from tests.conftest import collection_of
    from tests.support.embedders import ConnectionCuttingEmbedder

    collection_of("atlas", {"n": "North is up."})
    client.force_login(django_user_model.objects.create_user(username="reader"))
    retrieval_settings(
        EMBEDDERS={"default": {"BACKEND": "tests.support.embedders.ConnectionCuttingEmbedder"}}
    )
    connection.ensure_connection()
    ConnectionCuttingEmbedder.cut_pid = connection.connection.info.backend_pid
    ConnectionCuttingEmbedder.cut_url = database_url(connection.settings_dict)
    body = {"collection": "atlas", "query": "north", "retriever": "hybrid"}
    response = client.post("/api/search/", body, content_type="application/json")
    assert ConnectionCuttingEmbedder.cut_pid is None  # the cut happened, mid-search
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5"
    connection.close_if_unusable_or_obsolete()
    assert client.post("/api/search/", body, content_type="application/json").status_code == 200


@pytest.mark.parametrize("form", ["html", "json"])
def test_the_search_page_the_database_drops_is_a_503_to_retry(
    client, django_user_model, keyword_settings, form
):
    """The load bench's PostgreSQL restart made the HTML search page a 500 (Django's own
    handler: the page had no 503 of its own, where the API had)."""
    from tests.conftest import collection_of

    collection_of("atlas", {"n": "North is up."})
    client.force_login(django_user_model.objects.create_user(username="reader"))
    path = "/?collection=atlas&q=north" + ("&format=json" if form == "json" else "")
    cut_off(connection)
    response = client.get(path)
    assert response.status_code == 503 and response["Retry-After"] == "5"
    if form == "json":
        assert response.json()["detail"] == "The database did not answer. Try again shortly."
    else:
        assert b"The database did not answer. Try again shortly." in response.content
    connection.close_if_unusable_or_obsolete()
    answered = client.get(path)
    assert answered.status_code == 200 and b"North is up." in answered.content
