"""Adding a query to a golden set and judging its results need the same permission, so
an editor offered the one is offered the other."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from retrieval.models import EvalQuery, EvalSet, QueryTrace

pytestmark = pytest.mark.django_db

VIEW = ["view_collection", "view_document", "view_chunk", "view_querytrace", "view_evalset"]


def staff(name: str, *codenames: str) -> Client:
    user = get_user_model().objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=[*VIEW, *codenames]))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def gold(atlas):
    QueryTrace.objects.create(collection=atlas, query="north", pipeline="default", result_count=1)
    return EvalSet.objects.create(name="gold", collection=atlas)


def offers(client: Client, atlas) -> tuple[bool, bool]:
    """Whether analytics offers adding "north" to a set, and the playground judge buttons."""
    analytics = client.get(reverse("admin:retrieval_search_analytics"), {"collection": atlas.pk})
    row = next(item for item in analytics.context["top"] if item["row"].query == "north")
    playground = client.get(
        reverse("admin:retrieval_playground"), {"collection": atlas.pk, "query": "north"}
    )
    return "golden" in row["links"], 'name="grade"' in playground.content.decode()


def test_who_may_add_queries_but_not_change_sets_is_offered_neither(atlas, gold):
    client = staff("adder", "add_evalquery", "add_judgment")
    assert offers(client, atlas) == (False, False)
    refused = client.post(
        reverse("admin:retrieval_evalset_add_query"), {"eval_set": gold.pk, "query": "north"}
    )
    assert refused.status_code == 403 and not EvalQuery.objects.exists()


def test_who_may_change_sets_adds_a_query_and_judges_it(atlas, gold):
    client = staff("judge", "change_evalset")
    assert offers(client, atlas) == (True, True)
    added = client.post(
        reverse("admin:retrieval_evalset_add_query"), {"eval_set": gold.pk, "query": "north"}
    )
    assert added.status_code == 302
    assert list(EvalQuery.objects.values_list("text", flat=True)) == ["north"]


def test_the_golden_sets_list_links_the_beir_import_to_who_may_add_sets(atlas, gold):
    link = f'href="{reverse("admin:retrieval_evalset_import")}"'
    changelist = reverse("admin:retrieval_evalset_changelist")
    assert link in staff("adder", "add_evalset").get(changelist).content.decode()
    assert link not in staff("viewer").get(changelist).content.decode()
