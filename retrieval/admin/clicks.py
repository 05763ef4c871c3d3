"""Clicks on search results: which document a reader followed from which search.

Read-only, as the system writes them (``POST /api/clicks/``, the search page). A click
is seen by whoever may see its search: the access policy's rule for traces
(:meth:`~retrieval.services.access.Scope.restrict_traces`) decides, so staff whom a
document restriction narrows see only the clicks on their own searches.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from retrieval.models import QueryTrace, SearchClick

from .base import ReadOnlyAdmin, ScopedAdminMixin, scope_of


@admin.register(SearchClick)
class SearchClickAdmin(ScopedAdminMixin, ReadOnlyAdmin):
    """The clicks on the searches the user may see; nobody edits or deletes one (they go
    with their search)."""

    collection_path = "trace__collection"
    list_display = ["created_at", "query", "position", "document", "collection"]
    list_filter = [("trace__collection", admin.RelatedOnlyFieldListFilter), "position"]
    list_select_related = ["trace__collection", "document"]
    search_fields = ["trace__query"]
    date_hierarchy = "created_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # The traces' rule, in place of the mixin's collection rule.
        traces = scope_of(request).restrict_traces(QueryTrace.objects.order_by())
        queryset = super(ScopedAdminMixin, self).get_queryset(request)
        return queryset.filter(trace__in=traces.values("pk"))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="query", ordering="trace__query")
    def query(self, click: SearchClick) -> str:
        return click.trace.query

    @admin.display(description="collection", ordering="trace__collection")
    def collection(self, click: SearchClick) -> Any:
        return click.trace.collection
