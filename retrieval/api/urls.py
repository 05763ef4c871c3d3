"""The REST API; a site mounts it under any prefix, e.g. ``path("api/", include(...))``."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from . import answers, clicks, feedback, graph, schema, search, suggest, tools, views

app_name = "retrieval-api"

router = DefaultRouter()
router.register("collections", views.CollectionViewSet, basename="collection")
router.register("documents", views.DocumentViewSet, basename="document")
router.register("chunks", views.ChunkViewSet, basename="chunk")
router.register("index-runs", views.IndexRunViewSet, basename="indexrun")
router.register("triples", graph.TripleViewSet, basename="triple")

urlpatterns = [
    path("", include(router.urls)),
    path("search/", search.SearchView.as_view(), name="search"),
    path("search/batch/", search.BatchSearchView.as_view(), name="search-batch"),
    path("answer/", answers.AnswerView.as_view(), name="answer"),
    path("feedback/", feedback.FeedbackView.as_view(), name="feedback"),
    path("clicks/", clicks.ClickView.as_view(), name="click"),
    path("suggest/", suggest.SuggestView.as_view(), name="suggest"),
    path("tools/", tools.ToolListView.as_view(), name="tools"),
    path("tools/call/", tools.ToolCallView.as_view(), name="tool-call"),
    path("schema/", schema.SchemaView.as_view(), name="schema"),
    path("docs/", schema.SwaggerView.as_view(url_name="retrieval-api:schema"), name="docs"),
]
