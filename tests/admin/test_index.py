"""The admin index lists the app's screens (dashboard, playground, analytics, graph)
beside its models, to those who may open them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

SCREENS = {
    "Dashboard": "/admin/retrieval/",
    "Search playground": "/admin/retrieval/collection/playground/",
    "Search analytics": "/admin/retrieval/querytrace/analytics/",
    "Graph explorer": "/admin/retrieval/entity/",
}


def index_links(user) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    response = client.get(reverse("admin:index"))
    assert response.status_code == 200
    return {
        model["name"]: model["admin_url"]
        for app in response.context["app_list"]
        if app["app_label"] == "retrieval"
        for model in app["models"]
    }


def test_the_index_lists_every_screen_for_a_superuser():
    root = get_user_model().objects.create_superuser("root", password="x")
    links = index_links(root)
    assert {name: links.get(name) for name in SCREENS} == SCREENS
    for url in SCREENS.values():  # each opens
        client = Client()
        client.force_login(root)
        assert client.get(url).status_code == 200, url


def test_a_screen_is_listed_only_to_those_who_may_list_its_model():
    user = get_user_model().objects.create_user("docs", password="x", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(codename__in=["view_collection", "view_document"])
    )
    links = index_links(get_user_model().objects.get(pk=user.pk))
    assert "Dashboard" in links and "Search playground" in links
    assert "Search analytics" not in links and "Graph explorer" not in links


def test_the_screens_rows_do_not_reuse_the_dashboard_s_id():
    root = get_user_model().objects.create_superuser("root", password="x")
    client = Client()
    client.force_login(root)
    landing = client.get(reverse("admin:app_list", kwargs={"app_label": "retrieval"}))
    assert landing.content.decode().count('id="retrieval-dashboard"') == 1
