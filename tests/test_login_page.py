"""The search page works in a site with no login view or ``registration/login.html``.

The README's site included ``django.contrib.auth.urls`` for the sign-in the page asks
for, whose template only the example project had: ``/accounts/login/`` was a 500. The
app now sends visitors to the site's ``LOGIN_URL`` when a view answers it, else to its
own sign-in page, with its own template.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import include, path

pytestmark = pytest.mark.django_db

urlpatterns = [path("retrieval/", include("retrieval.urls"))]


@pytest.fixture
def bare_site(settings):
    settings.ROOT_URLCONF = __name__
    settings.LOGIN_URL = "/accounts/login/"  # Django's default: nothing answers it here
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": []}]  # no registration/login.html
    get_user_model().objects.create_user(username="reader", password="reader-pass")


def test_a_visitor_signs_in_on_the_apps_own_page_and_comes_back(bare_site):
    client = Client()
    response = client.get("/retrieval/", {"q": "north"})
    assert response.status_code == 302
    assert response["Location"] == "/retrieval/login/?next=/retrieval/%3Fq%3Dnorth"
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "retrieval/login.html" in [t.name for t in page.templates]
    signed_in = client.post(
        response["Location"],
        {"username": "reader", "password": "reader-pass", "next": "/retrieval/?q=north"},
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == "/retrieval/?q=north"
    assert client.get("/retrieval/").status_code == 200


def test_the_sites_own_login_url_is_used_when_it_answers(settings):
    settings.LOGIN_URL = "login"  # the example project's named view
    response = Client().get("/")
    assert response["Location"] == "/accounts/login/?next=/"
