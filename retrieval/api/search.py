"""Search views: one query, or a batch of queries run concurrently, and their serializers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.conf import retrieval_settings
from retrieval.exceptions import InvalidFilterError, RetrievalError, ServiceUnavailableError
from retrieval.models import Collection, QueryTrace
from retrieval.services.core.filters import Filters
from retrieval.services.query.search import search, search_batch
from retrieval.services.query.search_log import traced_as
from retrieval.services.registry import rerankers, retrievers, rewriters
from retrieval.services.results.clicks import click_token
from retrieval.services.rewriters.base import HISTORY_ROLES, normalize_turn
from retrieval.services.types import SearchResults

from .parsers import BoundedJSONField
from .serializers import known_component
from .throttling import SearchThrottleMixin
from .views import RetrievalAPIMixin

#: The longest turn of a conversation's history, in characters (as a query's).
TURN_CHARS = 10_000


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "maxLength": TURN_CHARS, "description": "An earlier user message."},
            {
                "type": "object",
                "properties": {
                    "role": {"type": "string", "enum": list(HISTORY_ROLES), "default": "user"},
                    "content": {"type": "string", "maxLength": TURN_CHARS},
                },
                "required": ["content"],
            },
        ]
    }
)
class TurnField(serializers.Field):
    """A conversation turn as the service takes it: a string (an earlier user message) or
    ``{"role", "content"}``; returned as ``{"role", "content"}``."""

    def to_internal_value(self, data: Any) -> dict[str, str]:
        try:
            turn = normalize_turn(data)
        except ValueError as e:
            raise serializers.ValidationError(f"The turn {e}") from None
        if len(turn["content"]) > TURN_CHARS:
            raise serializers.ValidationError(f"A turn has at most {TURN_CHARS} characters.")
        return turn

    def to_representation(self, value: Any) -> Any:
        return value


class SearchOptionsSerializer(serializers.Serializer):
    """What a search and a batch of searches share."""

    collection = serializers.CharField(
        max_length=200, help_text="Collection slug (or name). Unknown or hidden: 404."
    )
    pipeline = serializers.CharField(
        required=False, help_text="Pipeline alias (default: DEFAULT_PIPELINE)."
    )
    retriever = serializers.CharField(
        required=False, help_text="Retriever alias to run alone, instead of a pipeline."
    )
    rewrite = serializers.CharField(
        required=False, help_text="Rewriter alias replacing the pipeline's rewrite step."
    )
    rerank = serializers.CharField(
        required=False, help_text="Reranker alias replacing the pipeline's rerank step."
    )
    history = serializers.ListField(
        child=TurnField(),
        required=False,
        max_length=50,
        help_text="Earlier turns for rewriters: strings (earlier user messages) or "
        '{"role": "user" or "assistant", "content": "..."}.',
    )
    top_k = serializers.IntegerField(default=10, min_value=1, max_value=1000)
    filters = BoundedJSONField(required=False, default=None)
    max_tokens = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000_000,
        help_text="Also pack the best results into a context of at most this many tokens.",
    )

    def validate_retriever(self, value: str) -> str:
        return known_component(retrievers, value, "retriever")

    def validate_pipeline(self, value: str) -> str:
        return known_component(retrieval_settings.PIPELINES, value, "pipeline")

    def validate_rewrite(self, value: str) -> str:
        return known_component(rewriters, value, "rewriter")

    def validate_rerank(self, value: str) -> str:
        return known_component(rerankers, value, "reranker")

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data.get("pipeline") and data.get("retriever"):
            raise serializers.ValidationError("Name a pipeline or a retriever, not both.")
        return data

    def search_options(self) -> dict[str, Any]:
        """Return the validated options as :func:`~retrieval.services.query.search.search`
        takes them."""
        data = self.validated_data
        return {
            "pipeline": data.get("pipeline"),
            "retriever": data.get("retriever"),
            "rewriter": data.get("rewrite"),
            "reranker": data.get("rerank"),
            "history": data.get("history"),
            "top_k": data["top_k"],
            "filters": data["filters"],
            "max_tokens": data.get("max_tokens"),
        }

    def validate_filters(self, value: Any) -> Filters:
        try:
            return Filters.parse(value)
        except InvalidFilterError as e:
            raise serializers.ValidationError(str(e)) from e


class SearchSerializer(SearchOptionsSerializer):
    query = serializers.CharField(max_length=10_000)


class BatchSearchSerializer(SearchOptionsSerializer):
    queries = serializers.ListField(
        child=serializers.CharField(max_length=10_000),
        min_length=1,
        help_text="Query texts, run concurrently; at most MAX_BATCH_QUERIES (default 32).",
    )

    def validate_queries(self, value: list[str]) -> list[str]:
        limit = int(retrieval_settings.MAX_BATCH_QUERIES)
        if len(value) > limit:
            raise serializers.ValidationError(
                f"{len(value)} queries; a batch holds at most {limit} (MAX_BATCH_QUERIES)."
            )
        return value


class SearchResultSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    score = serializers.FloatField()
    document = serializers.CharField(help_text="The document's external id.")
    title = serializers.CharField()
    chunk_id = serializers.IntegerField()
    chunk_index = serializers.IntegerField()
    start = serializers.IntegerField()
    end = serializers.IntegerField()
    page = serializers.IntegerField(allow_null=True)
    heading_path = serializers.ListField(child=serializers.CharField())
    token_count = serializers.IntegerField()
    text = serializers.CharField()
    metadata = serializers.DictField(help_text="Includes each fused leg's score and rank.")


class CitationSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="The [number] in the context text.")
    document_id = serializers.IntegerField()
    document = serializers.CharField(help_text="The document's external id.")
    title = serializers.CharField()
    page = serializers.IntegerField(allow_null=True)
    heading_path = serializers.ListField(child=serializers.CharField())
    start = serializers.IntegerField(help_text="Offset in the document's text.")
    end = serializers.IntegerField()
    chunk_ids = serializers.ListField(child=serializers.IntegerField())


class ContextSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="Passages headed [n] title, ready for a prompt.")
    citations = CitationSerializer(many=True)
    token_count = serializers.IntegerField()
    results_used = serializers.IntegerField()


class SearchResponseSerializer(serializers.Serializer):
    results = SearchResultSerializer(many=True)
    context = ContextSerializer(required=False, help_text="Present when max_tokens was given.")
    trace = serializers.DictField(
        help_text="What ran: rewrites, agentic rounds, reranking, LLM calls (tokens, ms)."
    )
    click_token = serializers.CharField(
        allow_null=True,
        help_text="Post it with a followed result's document to /api/clicks/; null when the "
        "search was not kept as a trace (TRACE_SAMPLE_RATE).",
    )


class BatchItemSerializer(SearchResponseSerializer):
    query = serializers.CharField()


class BatchSearchResponseSerializer(serializers.Serializer):
    results = BatchItemSerializer(many=True, help_text="One entry per query, in input order.")


def _answer(results: SearchResults, user: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"results": [result.to_dict() for result in results]}
    if results.context is not None:
        body["context"] = results.context.to_dict()
    body["trace"] = results.trace
    kept = results.trace_id is not None
    body["click_token"] = click_token(results.trace_id, user) if kept else None
    return body


def _validated(
    view: RetrievalAPIMixin, serializer_class: type[Any], request: Request
) -> tuple[Any, Collection]:
    """Validate a search body and return it with its collection (404 if hidden or missing)."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer, view.collection_or_404(serializer.validated_data["collection"])


class ServiceUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "A service the search needs did not answer."
    default_code = "service_unavailable"


#: Documented beside each search endpoint's 200.
UNAVAILABLE = OpenApiResponse(
    description="A service the search needs (an index engine, the embedding endpoint) did not "
    "answer; the message names it. Try again later."
)


def _refused(error: Exception) -> APIException:
    """The answer to a search the service refused: 503 if a service did not answer, else 400."""
    if isinstance(error, ServiceUnavailableError):
        return ServiceUnavailable(str(error))
    return ValidationError(str(error))


class SearchView(SearchThrottleMixin, RetrievalAPIMixin, APIView):
    """Search a collection with a named retriever; optionally pack a context for an LLM."""

    @extend_schema(
        request=SearchSerializer,
        responses={200: SearchResponseSerializer, 503: UNAVAILABLE},
    )
    def post(self, request: Request) -> Response:
        serializer, collection = _validated(self, SearchSerializer, request)
        data = serializer.validated_data
        try:
            with traced_as(QueryTrace.Source.API):
                results = search(
                    data["query"],
                    collection=collection,
                    scope=self.scope,
                    **serializer.search_options(),
                )
        except (RetrievalError, ValueError) as e:
            raise _refused(e) from e
        return Response(_answer(results, request.user))


class BatchSearchView(SearchThrottleMixin, RetrievalAPIMixin, APIView):
    """Run several queries against one collection concurrently; answers in input order."""

    @extend_schema(
        request=BatchSearchSerializer,
        responses={200: BatchSearchResponseSerializer, 503: UNAVAILABLE},
    )
    def post(self, request: Request) -> Response:
        serializer, collection = _validated(self, BatchSearchSerializer, request)
        data = serializer.validated_data
        try:
            with traced_as(QueryTrace.Source.API):
                batches = search_batch(
                    data["queries"],
                    collection=collection,
                    scope=self.scope,
                    **serializer.search_options(),
                )
        except (RetrievalError, ValueError) as e:
            raise _refused(e) from e
        answers = [
            {"query": query, **_answer(results, request.user)}
            for query, results in zip(data["queries"], batches, strict=True)
        ]
        return Response({"results": answers})
