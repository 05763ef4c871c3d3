"""The graph explorer: an admin page per collection to search and draw its knowledge graph.

Registered with the Entity admin (``admin.py`` imports this module), so its URLs
live under ``/admin/retrieval/entity/``: ``explorer/<collection id>/`` draws the
graph, ``explorer/<collection id>/neighbourhood/`` and ``.../entities/`` answer
the page's JSON requests. Every view is staff-only through ``admin_view``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.staticfiles import finders
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse

from retrieval.models import Collection, Entity, Triple
from retrieval.services.access import Scope
from retrieval.services.graph.traversal import neighbourhood

from .base import COLLECTION_FILTER, ReadOnlyAdmin, ScopedAdminMixin, scope_of

VENDOR_SCRIPT = "retrieval/vendor/cytoscape.min.js"
MAX_HOPS = 3


def _visible_triples(scope: Scope) -> QuerySet:
    """Return the triples of chunks in ``scope``."""
    return scope.restrict(Triple.objects.all(), document="chunk__document")


class BadRequest(ValueError):
    """A query parameter the explorer cannot use; answered with a 400 and its message."""


def parse_neighbourhood_query(params: Any) -> dict[str, Any]:
    """Return ``neighbourhood()`` keyword arguments from query parameters, or raise BadRequest."""
    entity = (params.get("entity") or "").strip()
    if not entity:
        raise BadRequest("Give an entity: ?entity=NAME.")
    try:
        hops = int(params.get("hops", 1))
        min_confidence = float(params.get("min_confidence", 0))
    except ValueError as e:
        raise BadRequest(f"hops must be an integer and min_confidence a number: {e}") from e
    if not 1 <= hops <= MAX_HOPS:
        raise BadRequest(f"hops must be between 1 and {MAX_HOPS}, not {hops}.")
    if not 0.0 <= min_confidence <= 1.0:
        raise BadRequest(f"min_confidence must be between 0 and 1, not {min_confidence}.")
    predicates = [p for value in params.getlist("predicate") for p in value.split(",") if p]
    return {
        "entity": entity,
        "hops": hops,
        "predicates": predicates or None,
        "min_confidence": min_confidence,
    }


@admin.register(Entity)
class EntityAdmin(ScopedAdminMixin, ReadOnlyAdmin):
    """Entities are written by extraction; the admin browses them and opens the explorer."""

    list_display = ["display", "key", "collection"]
    list_filter = [COLLECTION_FILTER]
    search_fields = ["key", "display"]
    change_list_template = "retrieval/admin/entity_change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        scope = scope_of(request)
        entities = super().get_queryset(request)
        if scope.documents is not None:
            # Only entities some visible triple mentions: the others name what hidden
            # documents say.
            triples = _visible_triples(scope).filter(collection_id=OuterRef("collection_id"))
            entities = entities.filter(
                Exists(triples.filter(subject_key=OuterRef("key")))
                | Exists(triples.filter(object_key=OuterRef("key")))
            )
        return entities

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        scope = scope_of(request)
        hidden = scope.documents is not None
        collections = scope.visible_collections().annotate(
            triples_count=Count(
                "triples", filter=Q(triples__in=_visible_triples(scope)) if hidden else None
            )
        )
        return super().changelist_view(
            request, {**(extra_context or {}), "explorer_collections": collections}
        )

    def get_urls(self) -> list:
        wrap = self.admin_site.admin_view
        return [
            path(
                "explorer/<int:collection_id>/",
                wrap(self.explorer_view),
                name="retrieval_graph_explorer",
            ),
            path(
                "explorer/<int:collection_id>/neighbourhood/",
                wrap(self.neighbourhood_view),
                name="retrieval_graph_neighbourhood",
            ),
            path(
                "explorer/<int:collection_id>/entities/",
                wrap(self.entities_view),
                name="retrieval_graph_entities",
            ),
            *super().get_urls(),
        ]

    def _collection(self, request: HttpRequest, collection_id: int) -> Collection:
        if not self.has_view_permission(request):
            raise Http404("No graph explorer for you.")
        # A hidden collection is a 404, like a missing one.
        return get_object_or_404(scope_of(request).visible_collections(), pk=collection_id)

    def explorer_view(self, request: HttpRequest, collection_id: int) -> HttpResponse:
        collection = self._collection(request, collection_id)
        triples = _visible_triples(scope_of(request)).filter(collection=collection)
        predicates = (
            triples.values("predicate_key")
            .annotate(n=Count("id"))
            .order_by("-n", "predicate_key")[:100]
        )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Knowledge graph of {collection.name}",
            "opts": self.model._meta,
            "collection": collection,
            "predicates": [p["predicate_key"] for p in predicates],
            "triples_count": triples.count(),
            "vendor_script": VENDOR_SCRIPT,
            "vendor_present": finders.find(VENDOR_SCRIPT) is not None,
            "neighbourhood_url": reverse(
                "admin:retrieval_graph_neighbourhood", args=[collection.pk]
            ),
            "entities_url": reverse("admin:retrieval_graph_entities", args=[collection.pk]),
            "chunk_url": reverse("admin:retrieval_chunk_change", args=[0]),
            "initial_entity": request.GET.get("entity", ""),
        }
        return TemplateResponse(request, "retrieval/admin/graph_explorer.html", context)

    def neighbourhood_view(self, request: HttpRequest, collection_id: int) -> JsonResponse:
        collection = self._collection(request, collection_id)
        try:
            query = parse_neighbourhood_query(request.GET)
        except BadRequest as e:
            return JsonResponse({"error": str(e)}, status=400)
        graph = neighbourhood(collection, query.pop("entity"), scope=scope_of(request), **query)
        return JsonResponse(graph)

    def entities_view(self, request: HttpRequest, collection_id: int) -> JsonResponse:
        collection = self._collection(request, collection_id)
        term = request.GET.get("q", "").strip()
        triples = _visible_triples(scope_of(request)).filter(collection=collection)
        entities = (
            Entity.objects.filter(collection=collection)
            .filter(Q(key__icontains=term) | Q(display__icontains=term))
            # Only entities some triple still mentions (see prune_entities).
            .filter(
                Exists(triples.filter(subject_key=OuterRef("key")))
                | Exists(triples.filter(object_key=OuterRef("key")))
            )
            .order_by("key")[:20]
        )
        return JsonResponse({"entities": [{"key": e.key, "label": e.display} for e in entities]})
