"""A plain search page: pick a collection, type a query, read the ranked chunks.

It requires a signed-in user unless ``RETRIEVAL["SEARCH_PAGE_PUBLIC"]`` is True, and
lists and searches only what the visitor's :class:`Scope` may see.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.views.generic import TemplateView

from .conf import retrieval_settings
from .exceptions import RetrievalError


class SearchView(TemplateView):
    template_name = "retrieval/search.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not retrieval_settings.SEARCH_PAGE_PUBLIC and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from .services.access import Scope
        from .services.search import search

        context = super().get_context_data(**kwargs)
        scope = Scope.for_request(self.request)
        collections = list(scope.visible_collections().order_by("name"))
        query = self.request.GET.get("q", "").strip()
        selected = self.request.GET.get("collection") or (
            collections[0].name if collections else ""
        )
        results, error = [], ""
        if query and selected:
            try:
                results = search(query, collection=selected, scope=scope, top_k=10)
            except (RetrievalError, ValueError) as e:
                error = str(e)
        context.update(
            collections=collections, query=query, selected=selected, results=results, error=error
        )
        return context
