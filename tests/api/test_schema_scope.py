"""``/api/schema/`` describes the app's own routes only, wherever they are mounted (issue 31, E5).

On a Wagtail site the schema view described the whole site and failed (500) on a view of
the host's that drf-spectacular cannot read; here a host view whose schema raises stands
in for it (the Wagtail suite checks a real Wagtail site).
"""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.test import Client, override_settings
from django.urls import include, path
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.settings import spectacular_settings
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

pytestmark = pytest.mark.django_db


class Unreadable(AutoSchema):
    def get_operation(self, *args, **kwargs):
        raise RuntimeError("a host view no schema generator can read")


class HostView(APIView):
    schema = Unreadable()

    def get(self, request):
        return Response({})


urlpatterns = [
    path("host/", HostView.as_view()),
    path("v1/retrieval/", include("retrieval.api.urls")),
]


@pytest.fixture
def client(settings):
    settings.ROOT_URLCONF = __name__
    user = get_user_model().objects.create_user(username="reader", password="x")
    client = Client()
    client.force_login(user)
    return client


def test_the_schema_covers_the_apps_routes_under_their_prefix_and_nothing_else(client):
    response = client.get("/v1/retrieval/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["info"]["title"] == "django-retrieval API"
    paths = set(schema["paths"])
    assert "/v1/retrieval/search/" in paths and "/v1/retrieval/collections/" in paths
    assert all(p.startswith("/v1/retrieval/") for p in paths), sorted(paths)
    assert "/v1/retrieval/docs/" not in paths  # an HTML page, as drf-spectacular leaves it out


def test_swagger_ui_loads_from_local_static_files(client, monkeypatch):
    # drf-spectacular's defaults, as a site that never copied the example's settings has
    cdn = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@latest"
    monkeypatch.setattr(spectacular_settings, "SWAGGER_UI_DIST", cdn)
    monkeypatch.setattr(spectacular_settings, "SWAGGER_UI_FAVICON_HREF", cdn + "/favicon-32x32.png")
    page = client.get("/v1/retrieval/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower()
    assert "/v1/retrieval/schema/" in page


@pytest.fixture
def site_without_rest_framework():
    """The site as the README makes it: no ``REST_FRAMEWORK`` setting at all.

    Deleting a setting sends no ``setting_changed``, so DRF's cached ``api_settings`` is
    told here, on the way in and on the way out.
    """
    with override_settings():
        del django_settings.REST_FRAMEWORK
        setting_changed.send(sender=None, setting="REST_FRAMEWORK", value=None, enter=True)
        yield
    setting_changed.send(
        sender=None, setting="REST_FRAMEWORK", value=django_settings.REST_FRAMEWORK, enter=False
    )


def test_the_schema_and_docs_build_on_a_site_with_no_rest_framework_setting(
    client, site_without_rest_framework
):
    # DRF's own default schema class is the one drf-spectacular refuses
    # ("Incompatible AutoSchema used on View ...").
    assert api_settings.DEFAULT_SCHEMA_CLASS.__module__ == "rest_framework.schemas.openapi"
    schema = client.get("/v1/retrieval/schema/", {"format": "json"})
    assert schema.status_code == 200, schema.content[:300]
    assert "/v1/retrieval/search/" in schema.json()["paths"]
    docs = client.get("/v1/retrieval/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()
