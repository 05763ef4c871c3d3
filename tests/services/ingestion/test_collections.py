"""Creating a collection while another transaction creates the same one (or takes its slug):
no IntegrityError escapes, on the service or the API."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction
from rest_framework.test import APIClient

from retrieval.models import Collection
from retrieval.services.ingestion.collections import get_or_create_collection
from tests.conftest import editor

pytestmark = pytest.mark.django_db(transaction=True)


def while_another_transaction_creates(name: str, create: Callable[[], object]) -> object:
    """Run ``create`` while another session has created collection ``name`` and not yet
    committed: ``create`` checks, finds nothing, and its insert waits on that session,
    which commits once it sees the wait. Return what ``create`` returned."""
    created, failures = threading.Event(), []

    def other_session() -> None:
        try:
            with transaction.atomic():
                get_or_create_collection(name)
                created.set()
                with connection.cursor() as cursor:
                    for _ in range(600):
                        cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                        if cursor.fetchone()[0]:
                            break
                        time.sleep(0.05)
                    else:
                        failures.append("nobody waited on the uncommitted collection")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))
            created.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=other_session)
    thread.start()
    assert created.wait(30)
    try:
        return create()
    finally:
        thread.join()
        assert failures == []


def test_the_same_name_created_meanwhile_is_returned(keyword_settings):
    collection, created = while_another_transaction_creates(
        "Atlas", lambda: get_or_create_collection("Atlas")
    )
    assert not created and collection == Collection.objects.get(name="Atlas")


def test_a_slug_taken_meanwhile_gives_the_next_one(keyword_settings):
    collection, created = while_another_transaction_creates(
        "Atlas", lambda: get_or_create_collection("ATLAS")
    )
    assert created and collection.slug == "atlas-2"
    assert sorted(Collection.objects.values_list("slug", flat=True)) == ["atlas", "atlas-2"]


def test_the_api_refuses_a_name_created_meanwhile_with_a_400(keyword_settings):
    client = APIClient()
    client.force_authenticate(editor("u"))
    response = while_another_transaction_creates(
        "Atlas",
        lambda: client.post(
            "/api/collections/", {"name": "Atlas", "description": "mine"}, format="json"
        ),
    )
    assert response.status_code == 400, response.content
    assert "exists" in str(response.json()["name"])
    assert Collection.objects.get(name="Atlas").description == ""
