"""``GET /api/suggest/?q=pre&collection=...``: autocomplete from past readers' queries.

What each reader is offered, and why, is in :mod:`retrieval.services.query.suggestions`.
Throttled under ``retrieval_suggest`` (``retrieval/api/throttling.py``).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.services.query.suggestions import suggest

from .throttling import SuggestThrottleMixin
from .views import RetrievalAPIMixin


class SuggestParametersSerializer(serializers.Serializer):
    q = serializers.CharField(max_length=200, trim_whitespace=False, help_text="What was typed.")
    collection = serializers.CharField(max_length=200, help_text="Collection name or slug.")
    limit = serializers.IntegerField(
        min_value=1, required=False, help_text="At most this many (default SUGGEST_LIMIT)."
    )


class SuggestResponseSerializer(serializers.Serializer):
    suggestions = serializers.ListField(child=serializers.CharField())


class SuggestView(SuggestThrottleMixin, RetrievalAPIMixin, APIView):
    """Suggest past queries of a collection that start with ``q``, the most asked first."""

    @extend_schema(
        parameters=[SuggestParametersSerializer],
        responses={200: SuggestResponseSerializer},
    )
    def get(self, request: Request) -> Response:
        parameters = SuggestParametersSerializer(data=request.query_params)
        parameters.is_valid(raise_exception=True)
        data = parameters.validated_data
        collection = self.collection_or_404(data["collection"])
        found = suggest(data["q"], collection=collection, scope=self.scope, limit=data.get("limit"))
        return Response({"suggestions": found})
