"""The search page's sign-in on a Wagtail site, whose page serving answers every path.

Django's default ``LOGIN_URL``, ``/accounts/login/``, resolves to Wagtail's catch-all,
which answers it with a 404: anonymous visitors of the search page were sent there.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db


def test_with_djangos_default_login_url_visitors_sign_in_on_the_apps_page(settings):
    settings.LOGIN_URL = "/accounts/login/"  # a site that never set it
    get_user_model().objects.create_user(username="reader", password="reader-pass")
    client = Client()
    assert client.get("/accounts/login/").status_code == 404  # Wagtail: no such page
    response = client.get("/search/", {"q": "north"})
    assert response.status_code == 302
    assert response["Location"] == "/search/login/?next=/search/%3Fq%3Dnorth"
    form = client.get(response["Location"])
    assert form.status_code == 200 and 'name="password"' in form.content.decode()
    signed_in = client.post(
        response["Location"],
        {"username": "reader", "password": "reader-pass", "next": "/search/?q=north"},
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == "/search/?q=north"
    assert client.get("/search/").status_code == 200


@pytest.mark.parametrize(
    ("login_url", "served_at"),
    [("wagtailcore_login", "/_util/login/"), ("wagtailadmin_login", "/admin/login/")],
)
def test_a_login_url_naming_wagtails_sign_in_is_used(settings, login_url, served_at):
    settings.LOGIN_URL = login_url
    client = Client()
    response = client.get("/search/")
    assert response["Location"] == f"{served_at}?next=/search/"
    form = client.get(response["Location"])
    assert form.status_code == 200 and 'name="password"' in form.content.decode()
