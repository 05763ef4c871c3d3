"""The REST API; a site mounts it under any prefix, e.g. ``path("api/", include(...))``."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from . import views

app_name = "retrieval-api"

router = DefaultRouter()
router.register("collections", views.CollectionViewSet, basename="collection")
router.register("documents", views.DocumentViewSet, basename="document")
router.register("chunks", views.ChunkViewSet, basename="chunk")
router.register("index-runs", views.IndexRunViewSet, basename="indexrun")

urlpatterns = [
    path("", include(router.urls)),
    path("search/", views.SearchView.as_view(), name="search"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="retrieval-api:schema"), name="docs"),
]
