"""The retrieval screens from Wagtail's admin menu, in a real headless Chromium (issue 39).

An editor with partial scope (the access hook shows them two of three collections)
signs in to Wagtail's admin at /admin/, opens the sidebar's "Retrieval" menu and
reaches the app's screens, which Django's admin serves at /django-admin/, seeing only
their collections. Screenshots go to ``test-artifacts/wagtail-*.png``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from retrieval.services.ingestion.collections import get_or_create_collection
from tests.support.browser import ARTIFACTS, screenshot

pytestmark = [
    pytest.mark.django_db(transaction=True, serialized_rollback=True),
    pytest.mark.slow,
]


@pytest.fixture
def editor(retrieval_settings):
    retrieval_settings(COLLECTION_ACCESS="tests.wagtail_site.access.collections")
    for name in ("handbook", "pages", "secret"):
        get_or_create_collection(name)
    user = get_user_model().objects.create_user(username="ed", password="ed-pass", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="wagtailadmin", codename="access_admin")
        | Permission.objects.filter(
            content_type__app_label="retrieval",
            codename__in=["view_collection", "view_document", "add_document", "view_indexrun"],
        )
    )
    return user


def open_retrieval_menu(page) -> None:
    page.get_by_role("button", name="Retrieval").click()


def test_an_editor_reaches_the_retrieval_screens_from_wagtails_menu(
    editor, browser_page, live_server
):
    page = browser_page
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "ed")
    page.fill("#id_password", "ed-pass")
    page.locator("form button[type=submit], form input[type=submit]").first.click()
    page.wait_for_url(f"{live_server.url}/admin/")
    open_retrieval_menu(page)
    for label in ("Collections", "Documents", "Upload documents", "Search playground"):
        # The flyout opens with a transition: wait for each link (20 s at most).
        page.get_by_role("link", name=label, exact=True).wait_for(state="visible")
    assert page.get_by_role("link", name="Graph explorer").count() == 0  # no triple permission
    assert page.get_by_role("link", name="Search analytics").count() == 0  # nor trace's
    page.get_by_role("link", name="Collections", exact=True).wait_for(state="visible")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "wagtail-retrieval-menu.png"))  # the open flyout

    page.get_by_role("link", name="Collections", exact=True).click()
    page.wait_for_url(f"{live_server.url}/django-admin/retrieval/collection/")
    listed = page.locator("#result_list").inner_text()
    assert "handbook" in listed and "pages" in listed and "secret" not in listed
    screenshot(page, "wagtail-retrieval-collections")

    page.goto(f"{live_server.url}/admin/")
    open_retrieval_menu(page)
    page.get_by_role("link", name="Search playground", exact=True).click()
    page.wait_for_url(f"{live_server.url}/django-admin/retrieval/collection/playground/")
    choices = page.locator("#id_collection option").all_inner_texts()
    assert "handbook" in choices and "secret" not in choices
    screenshot(page, "wagtail-retrieval-playground")

    page.goto(f"{live_server.url}/admin/")
    open_retrieval_menu(page)
    page.get_by_role("link", name="Retrieval dashboard", exact=True).click()
    page.wait_for_url(f"{live_server.url}/django-admin/retrieval/")
    cards = page.locator("main, #content").first.inner_text()
    assert "handbook" in cards and "pages" in cards and "secret" not in cards
    screenshot(page, "wagtail-retrieval-dashboard")


def test_the_menu_is_shown_only_to_those_djangos_admin_lets_in(client):
    """A Wagtail editor who is not staff, or holds no retrieval permission, sees no menu."""
    model = get_user_model()
    wagtail = Permission.objects.filter(
        content_type__app_label="wagtailadmin", codename="access_admin"
    )
    reader = Permission.objects.filter(
        content_type__app_label="retrieval", codename="view_document"
    )
    for username, staff, permissions, shown in [
        ("plain", False, wagtail | reader, False),
        ("staff", True, wagtail, False),
        ("reader", True, wagtail | reader, True),
    ]:
        user = model.objects.create_user(username=username, password="x", is_staff=staff)
        user.user_permissions.set(permissions)
        client.force_login(user)
        menu = client.get("/admin/").content.decode()
        assert ("/django-admin/retrieval/document/" in menu) is shown, username
        assert "/django-admin/retrieval/collection/" not in menu, username


@pytest.mark.django_db
def test_the_menu_s_graph_explorer_opens_for_who_may_see_entities(client):
    """Issue 64: the menu's explorer link named a URL that needs a collection, so it was
    never shown; it opens the entity list, which links each collection's explorer."""
    from django.test import RequestFactory

    from retrieval.contrib.wagtail.wagtail_hooks import register_retrieval_menu

    user = get_user_model().objects.create_user(username="g", password="x", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_entity"))
    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.get(pk=user.pk)
    shown = {
        item.label: item.url
        for item in register_retrieval_menu().menu.menu_items_for_request(request)
    }
    assert shown["Graph explorer"] == "/django-admin/retrieval/entity/"
    client.force_login(user)
    assert client.get(shown["Graph explorer"]).status_code == 200
