"""Fuzz the API from its own OpenAPI schema: no generated request may get a 5xx."""

from __future__ import annotations

import base64
import json

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error

from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())
# Every phase pytest runs: the schema's examples, the coverage phase (each boundary and
# each kind of invalid value, a wrong method: ~2,100 requests) and a few random examples
# per operation. (The stateful phase needs a state machine, not parametrize.)
schema.config.phases.coverage.enabled = True
schema.config.phases.stateful.enabled = False
# Requests name the collection the fixture makes, so they reach the code behind the lookup.
schema.config.parameters = {"path.slug": "atlas"}

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """Requests go through the real WSGI handler; like Django's test client, keep it from
    closing the test's database connection at the end of each request."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def credentials(keyword_settings, settings) -> dict[str, str]:
    """A superuser (so writes get past the authorization to the code behind it), and a
    collection with a document so that lookups can hit real rows."""
    # Every request checks the password (Basic auth): with the default PBKDF2 that was
    # most of the test's time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    get_user_model().objects.create_superuser(username="fuzzer", password="fuzz")
    collection, _ = get_or_create_collection("atlas")
    ingest(collection, [Source.from_text("North is up.", external_id="n")])
    token = base64.b64encode(b"fuzzer:fuzz").decode()
    return {"Authorization": f"Basic {token}"}


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,  # the same examples on every run, so CI is repeatable
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_no_request_gets_a_server_error(case, credentials):
    case.call_and_validate(headers=credentials, checks=[not_a_server_error])


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", "/api/collections/atlas/", [None, None]),
        ("PUT", "/api/collections/atlas/", [None, None]),
        ("POST", "/api/tools/call/", {"collection": "", "name": {}, "arguments": None}),
        ("OPTIONS", "/api/docs/", None),
    ],
)
def test_requests_the_fuzzer_turned_into_server_errors_are_answered(
    method, path, body, credentials
):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=credentials["Authorization"])
    response = client.generic(
        method, path, json.dumps(body) if body is not None else "", "application/json"
    )
    if body is None:  # OPTIONS of the HTML page: the methods it allows
        assert response.status_code == 200 and "GET" in response["Allow"]
    else:
        assert response.status_code == 400, response.content[:300]
