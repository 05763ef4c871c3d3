"""Search views: one query, or a batch of queries run concurrently."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.exceptions import RetrievalError
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


class SearchView(SearchThrottleMixin, RetrievalAPIMixin, APIView):
    """Search a collection with a named retriever; optionally pack a context for an LLM."""

    @extend_schema(
        request=serializers.SearchSerializer,
        responses=serializers.SearchResponseSerializer,
    )
    def post(self, request: Request) -> Response:
        serializer = serializers.SearchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        collection = self.collection_or_404(data["collection"])
        try:
            results = search(data["query"], collection=collection, **serializer.search_options())
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
        serializer = serializers.BatchSearchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        collection = self.collection_or_404(data["collection"])
        try:
            batches = search_batch(
                data["queries"], collection=collection, **serializer.search_options()
            )
        except (RetrievalError, ValueError) as e:
            raise ValidationError(str(e)) from e
        answers = [
            {"query": query, **_answer(results)}
            for query, results in zip(data["queries"], batches, strict=True)
        ]
        return Response({"results": answers})
