"""Search views: one query, or a batch of queries run concurrently."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.search import search, search_batch
from retrieval.services.types import SearchResults

from . import serializers
from .throttling import SearchThrottleMixin
from .views import RetrievalAPIMixin


def _answer(results: SearchResults) -> dict[str, Any]:
    body: dict[str, Any] = {"results": [result.to_dict() for result in results]}
    if results.context is not None:
        body["context"] = results.context.to_dict()
    body["trace"] = results.trace
    return body


def _validated(
    view: RetrievalAPIMixin, serializer_class: type[Any], request: Request
) -> tuple[Any, Collection]:
    """Validate a search body and return it with its collection (404 if hidden or missing)."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer, view.collection_or_404(serializer.validated_data["collection"])


class SearchView(SearchThrottleMixin, RetrievalAPIMixin, APIView):
    """Search a collection with a named retriever; optionally pack a context for an LLM."""

    @extend_schema(
        request=serializers.SearchSerializer,
        responses=serializers.SearchResponseSerializer,
    )
    def post(self, request: Request) -> Response:
        serializer, collection = _validated(self, serializers.SearchSerializer, request)
        data = serializer.validated_data
        try:
            results = search(
                data["query"],
                collection=collection,
                scope=self.scope,
                **serializer.search_options(),
            )
        except (RetrievalError, ValueError) as e:
            raise ValidationError(str(e)) from e
        return Response(_answer(results))


class BatchSearchView(SearchThrottleMixin, RetrievalAPIMixin, APIView):
    """Run several queries against one collection concurrently; answers in input order."""

    @extend_schema(
        request=serializers.BatchSearchSerializer,
        responses=serializers.BatchSearchResponseSerializer,
    )
    def post(self, request: Request) -> Response:
        serializer, collection = _validated(self, serializers.BatchSearchSerializer, request)
        data = serializer.validated_data
        try:
            batches = search_batch(
                data["queries"],
                collection=collection,
                scope=self.scope,
                **serializer.search_options(),
            )
        except (RetrievalError, ValueError) as e:
            raise ValidationError(str(e)) from e
        answers = [
            {"query": query, **_answer(results)}
            for query, results in zip(data["queries"], batches, strict=True)
        ]
        return Response({"results": answers})
