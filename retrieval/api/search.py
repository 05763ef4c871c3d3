"""Search views: one query, or a batch of queries run concurrently."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.exceptions import RetrievalError
from retrieval.services.context import pack_context
from retrieval.services.search import search, search_batch
from retrieval.services.types import RetrievalResult

from . import serializers
from .throttling import SearchThrottleMixin
from .views import RetrievalAPIMixin


def _answer(results: Sequence[RetrievalResult], max_tokens: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"results": [result.to_dict() for result in results]}
    if max_tokens is not None:
        body["context"] = pack_context(results, max_tokens=max_tokens).to_dict()
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
            results = search(
                data["query"],
                collection=collection,
                retriever=data.get("retriever"),
                top_k=data["top_k"],
                filters=data["filters"],
            )
        except (RetrievalError, ValueError) as e:
            raise ValidationError(str(e)) from e
        return Response(_answer(results, data.get("max_tokens")))


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
                data["queries"],
                collection=collection,
                retriever=data.get("retriever"),
                top_k=data["top_k"],
                filters=data["filters"],
            )
        except (RetrievalError, ValueError) as e:
            raise ValidationError(str(e)) from e
        answers = [
            {"query": query, **_answer(results, data.get("max_tokens"))}
            for query, results in zip(data["queries"], batches, strict=True)
        ]
        return Response({"results": answers})
