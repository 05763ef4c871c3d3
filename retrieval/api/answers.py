"""The answer endpoint: a question answered from a collection's passages, citing them.

``POST /api/answer/`` takes the question and the search's options; with
``"stream": true`` the answer comes as server-sent events as the model writes it
(``token`` events with the text, a ``reset`` if the model failed mid-answer and the
extractive answer follows, then one ``answer`` event with the citations and the trace
id; an ``error`` event if the search itself fails once the stream has started).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import renderers, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from retrieval.exceptions import RetrievalError
from retrieval.models import QueryTrace
from retrieval.services.answers.records import Answer
from retrieval.services.answers.service import answer, answer_stream
from retrieval.services.query.search_log import traced_as
from retrieval.services.registry import llms
from retrieval.services.results.answer_box import answer_box

from .search import UNAVAILABLE, SearchOptionsSerializer, _refused, _validated
from .serializers import known_component
from .throttling import SearchThrottleMixin
from .views import RetrievalAPIMixin


class AnswerRequestSerializer(SearchOptionsSerializer):
    """A question, and the search that finds its passages."""

    # A search's steps that an answer does not take.
    rewrite = rerank = history = max_tokens = None  # type: ignore[assignment]
    question = serializers.CharField(max_length=10_000)
    top_k = serializers.IntegerField(
        required=False, min_value=1, max_value=100, help_text='Default ANSWERS["top_k"].'
    )
    llm = serializers.CharField(
        required=False, help_text='LLM alias writing the answer (default ANSWERS["llm"]).'
    )
    extractive = serializers.BooleanField(
        default=False, help_text="Answer with the passages' own sentences, asking no model."
    )
    min_score = serializers.FloatField(
        required=False,
        help_text='Results scoring less are not used (default ANSWERS["min_score"]).',
    )
    stream = serializers.BooleanField(
        default=False, help_text="Answer as server-sent events: token events, then the answer."
    )

    def validate_llm(self, value: str) -> str:
        return known_component(llms, value, "LLM")

    def answer_options(self) -> dict[str, Any]:
        """Return the validated options as :func:`answer` takes them."""
        data = self.validated_data
        return {
            "pipeline": data.get("pipeline"),
            "retriever": data.get("retriever"),
            "llm": data.get("llm"),
            "extractive": data["extractive"],
            "top_k": data.get("top_k"),
            "filters": data["filters"],
            "min_score": data.get("min_score"),
        }


class AnswerCitationSerializer(serializers.Serializer):
    number = serializers.IntegerField(help_text="The [number] in the answer's text.")
    document_id = serializers.IntegerField()
    document = serializers.CharField(help_text="The document's external id.")
    title = serializers.CharField()
    url = serializers.CharField(help_text='The document\'s metadata["url"], or "".')
    chunk_ids = serializers.ListField(child=serializers.IntegerField())
    start = serializers.IntegerField(help_text="Offset of the passage in the document's text.")
    end = serializers.IntegerField()
    page = serializers.IntegerField(allow_null=True)
    quote = serializers.CharField(help_text="The passage's sentence the answer rests on.")


class AnswerResponseSerializer(serializers.Serializer):
    question = serializers.CharField()
    text = serializers.CharField(help_text="The answer, citing passages as [n].")
    citations = AnswerCitationSerializer(many=True)
    abstained = serializers.BooleanField(help_text="The passages found do not answer it.")
    mode = serializers.ChoiceField(
        choices=["llm", "extractive", "retrieval"],
        help_text="Who answered: the LLM, the passages' sentences, or nobody (retrieval found "
        "nothing good enough).",
    )
    reason = serializers.CharField(
        help_text="Why it abstained, or why the LLM's answer was replaced by the extractive one."
    )
    uncited = serializers.ListField(
        child=serializers.CharField(), help_text="Sentences that cite no passage."
    )
    closest = serializers.ListField(
        child=serializers.DictField(), help_text="When it abstained: the documents found."
    )
    trace_id = serializers.IntegerField(allow_null=True, help_text="The stored trace, if kept.")
    sources = serializers.ListField(
        child=serializers.DictField(),
        help_text="The cited documents as the search page links them: number, title, url "
        "(the host's page or the document's, at the cited chunk), quote.",
    )
    closest_sources = serializers.ListField(
        child=serializers.DictField(),
        help_text="When it abstained: the closest documents as the search page links them "
        "(title, url).",
    )


def server_sent_events(events: Iterator[tuple[str, Any]]) -> Iterator[str]:
    """Return ``events`` as ``text/event-stream`` messages; a failure once the response
    has started (its status sent) ends it with an ``error`` event."""
    try:
        for kind, data in events:
            yield _message(kind, answer_json(data) if isinstance(data, Answer) else data)
    except (RetrievalError, ValueError) as e:
        refused = _refused(e)
        yield _message("error", {"detail": str(e), "status": refused.status_code})


class EventStreamRenderer(renderers.BaseRenderer):
    """Accept ``Accept: text/event-stream``: the stream is written by the view itself, and
    a refusal (a 4xx before the stream starts) is rendered as one ``error`` event."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return _message("error", data if isinstance(data, dict) else {"detail": data}).encode()


def answer_json(result: Answer) -> dict[str, Any]:
    """Return ``result`` as the API sends it: with its sources (and, when it abstained,
    the closest documents) linked as the search page links them."""
    box = answer_box(result).to_dict()
    closest = [{"title": item["title"], "url": item["url"]} for item in box["closest"]]
    return {**result.to_dict(), "sources": box["sources"], "closest_sources": closest}


def _message(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class AnswerView(SearchThrottleMixin, RetrievalAPIMixin, APIView):
    """Answer a question from a collection's passages, citing them; optionally streamed."""

    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, EventStreamRenderer]

    @extend_schema(
        request=AnswerRequestSerializer,
        responses={
            (200, "application/json"): AnswerResponseSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description='With "stream": true: "token" events ({"text"}) as the model '
                'writes, a "reset" ({"reason"}: forget the tokens, the extractive answer '
                'follows) if it fails mid-answer, then one "answer" event whose data is the '
                'JSON answer; or an "error" event ({"detail", "status"}).',
            ),
            503: UNAVAILABLE,
        },
    )
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        serializer, collection = _validated(self, AnswerRequestSerializer, request)
        data = serializer.validated_data
        ask = answer_stream if data["stream"] else answer
        try:
            with traced_as(QueryTrace.Source.API):
                result = ask(
                    data["question"],
                    collection=collection,
                    scope=self.scope,
                    **serializer.answer_options(),
                )
        except (RetrievalError, ValueError) as e:
            raise _refused(e) from e
        if not data["stream"]:
            return Response(answer_json(result))
        response = StreamingHttpResponse(
            server_sent_events(result), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # nginx: pass the events on as they come
        return response
