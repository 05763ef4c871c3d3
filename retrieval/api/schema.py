"""The API's OpenAPI schema and Swagger UI: the app's own routes, wherever they are mounted.

drf-spectacular's views describe the whole site by default, so one view of a host's
that no schema generator can read (a Wagtail view, a plain DRF ``AutoSchema``) made
``/api/schema/`` a 500. These describe the routes of :mod:`retrieval.api.urls` only,
under the prefix the request came through, and the UI loads Swagger's files from
``drf_spectacular_sidecar`` (no CDN) whatever the site's ``SPECTACULAR_SETTINGS`` say.
Both views are routes of the API too, so they carry drf-spectacular's schema class
themselves: a site with no ``REST_FRAMEWORK`` setting has DRF's own as its default, which
drf-spectacular refuses (a 500).
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.http import HttpResponse
from django.urls import include, path
from django.views import View
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.settings import patched_settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.request import Request
from rest_framework.response import Response

TITLE = "django-retrieval API"
#: Names of the enums two models' ``status`` fields would otherwise share under a hashed
#: name (drf-spectacular's W001). A site whose own schema includes the app's routes can
#: put the same entries in ``SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]``.
ENUM_NAME_OVERRIDES = {
    "DocumentStatusEnum": "retrieval.models.Document.Status",
    "IndexRunStatusEnum": "retrieval.models.IndexRun.Status",
}


class SchemaView(SpectacularAPIView):
    """The OpenAPI 3 schema of the app's API."""

    custom_settings = {"TITLE": TITLE, "ENUM_NAME_OVERRIDES": ENUM_NAME_OVERRIDES}
    schema = AutoSchema()

    @extend_schema(responses={200: OpenApiTypes.OBJECT})  # as drf-spectacular's own view
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        mounted = request.path_info.lstrip("/")
        # The prefix the site mounted the API under: this path less this view's own route.
        prefix = mounted.removesuffix("schema/") if mounted.endswith("schema/") else ""
        self.urlconf = [path(prefix, include("retrieval.api.urls"))]
        return super().get(request, *args, **kwargs)


class SwaggerView(SpectacularSwaggerView):
    """Swagger UI for :class:`SchemaView`, from local static files when the sidecar is installed."""

    title = TITLE
    schema = AutoSchema()

    @extend_schema(exclude=True)  # an HTML page, not an API operation
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        local = {"SWAGGER_UI_DIST": "SIDECAR", "SWAGGER_UI_FAVICON_HREF": "SIDECAR"}
        with patched_settings(local if apps.is_installed("drf_spectacular_sidecar") else None):
            return super().get(request, *args, **kwargs)

    def options(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        # Django's answer (the allowed methods): DRF's is metadata for a renderer, and this
        # page has only an HTML template's.
        return View.options(self, request, *args, **kwargs)
