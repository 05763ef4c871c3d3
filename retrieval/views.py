"""A plain search page: pick a collection, type a query, read the ranked chunks."""

from __future__ import annotations

from typing import Any

from django.views.generic import TemplateView

from .exceptions import RetrievalError
from .models import Collection


class SearchView(TemplateView):
    template_name = "retrieval/search.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from .services.search import search

        context = super().get_context_data(**kwargs)
        collections = list(Collection.objects.all())
        query = self.request.GET.get("q", "").strip()
        selected = self.request.GET.get("collection") or (
            collections[0].name if collections else ""
        )
        results, error = [], ""
        if query and selected:
            try:
                results = search(query, collection=selected, top_k=10)
            except RetrievalError as e:
                error = str(e)
        context.update(
            collections=collections, query=query, selected=selected, results=results, error=error
        )
        return context
