"""The Wagtail test site: Wagtail's admin at /admin/, Django's at /django-admin/, the
retrieval API (and a Wagtail API whose views drf-spectacular cannot read) beside pages."""

from django.contrib import admin
from django.urls import include, path
from wagtail import urls as wagtail_urls
from wagtail.admin import urls as wagtailadmin_urls
from wagtail.api.v2.router import WagtailAPIRouter
from wagtail.api.v2.views import PagesAPIViewSet

pages_api = WagtailAPIRouter("wagtailapi")
pages_api.register_endpoint("pages", PagesAPIViewSet)

urlpatterns = [
    path("django-admin/", admin.site.urls),
    path("admin/", include(wagtailadmin_urls)),
    path("api/", include("retrieval.api.urls")),
    path("wagtail-api/v2/", pages_api.urls),
    path("search/", include("retrieval.urls")),
    path("", include(wagtail_urls)),
]
