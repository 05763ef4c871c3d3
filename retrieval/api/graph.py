"""The knowledge graph over HTTP: triples, and an entity's neighbourhood."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from retrieval.models import Triple
from retrieval.services.graph.entities import entity_key
from retrieval.services.graph.traversal import neighbourhood

from .serializers import TripleSerializer
from .throttling import GRAPH_SCOPE, ScopedThrottleMixin
from .views import RetrievalAPIMixin


class NeighbourhoodQuerySerializer(serializers.Serializer):
    collection = serializers.CharField(max_length=200, help_text="Collection slug (or name).")
    entity = serializers.CharField(max_length=500, help_text="An entity's name, key or alias.")
    hops = serializers.IntegerField(default=1, min_value=1, max_value=4)
    predicates = serializers.CharField(
        required=False, help_text="Comma-separated predicates to follow (default: all)."
    )
    min_confidence = serializers.FloatField(default=0.0, min_value=0.0, max_value=1.0)


class NeighbourhoodSerializer(serializers.Serializer):
    entity = serializers.CharField()
    nodes = serializers.ListField(child=serializers.DictField())
    edges = serializers.ListField(
        child=serializers.DictField(), help_text="Triples, each with its source chunk id."
    )


class TripleViewSet(ScopedThrottleMixin, RetrievalAPIMixin, viewsets.ReadOnlyModelViewSet):
    """Knowledge-graph triples: filter by collection, entity, predicate, confidence, chunk."""

    queryset = Triple.objects.select_related("collection", "chunk__document").order_by("pk")
    serializer_class = TripleSerializer
    document_path = "chunk__document"

    @extend_schema(
        parameters=[
            OpenApiParameter("collection", str, description="Collection slug."),
            OpenApiParameter("entity", str, description="Subject or object (any spelling)."),
            OpenApiParameter("predicate", str),
            OpenApiParameter("min_confidence", float),
            OpenApiParameter("chunk", int),
        ]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet:
        triples = self.visible(super().get_queryset())
        params = self.request.query_params
        if "collection" in params:
            triples = triples.filter(collection__slug=params["collection"])
        if "entity" in params:
            key = entity_key(params["entity"])
            triples = triples.filter(Q(subject_key=key) | Q(object_key=key))
        if "predicate" in params:
            triples = triples.filter(predicate__iexact=params["predicate"].strip())
        if "min_confidence" in params:
            try:
                triples = triples.filter(confidence__gte=float(params["min_confidence"]))
            except ValueError as e:
                raise ValidationError({"min_confidence": ["A number from 0 to 1."]}) from e
        if "chunk" in params:
            if not params["chunk"].isdigit():
                raise ValidationError({"chunk": ["A chunk id is an integer."]})
            triples = triples.filter(chunk_id=int(params["chunk"]))
        return triples

    @extend_schema(
        parameters=[NeighbourhoodQuerySerializer],
        responses=NeighbourhoodSerializer,
    )
    @action(detail=False, methods=["get"], throttle_scope=GRAPH_SCOPE)
    def neighbourhood(self, request: Request) -> Response:
        """An entity's neighbourhood: nodes, and edges (triples) with their source chunks."""
        query = NeighbourhoodQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        collection = self.collection_or_404(data["collection"])
        predicates = [p.strip() for p in data.get("predicates", "").split(",") if p.strip()]
        graph = neighbourhood(
            collection,
            data["entity"],
            scope=self.scope,
            hops=data["hops"],
            predicates=predicates or None,
            min_confidence=data["min_confidence"],
        )
        return Response(graph)
