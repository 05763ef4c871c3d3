"""Agent tools over HTTP: a collection's tool specs, and running a call a model made."""

from __future__ import annotations

import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.services.tools import collection_tools

from .parsers import BoundedJSONField
from .throttling import ToolCallThrottleMixin
from .views import RetrievalAPIMixin


class ToolListSerializer(serializers.Serializer):
    tools = serializers.ListField(
        child=serializers.DictField(),
        help_text='OpenAI function-calling specs: {"type": "function", "function": {...}}.',
    )


class ToolCallSerializer(serializers.Serializer):
    collection = serializers.CharField(max_length=200, help_text="Collection slug (or name).")
    name = serializers.CharField(max_length=200, help_text="The tool's name.")
    arguments = BoundedJSONField(
        required=False, default=None, help_text="The model's arguments: a JSON string or object."
    )


class ToolListView(RetrievalAPIMixin, APIView):
    """The tools of a collection (``retrieve``, ``index_document``) as OpenAI function specs."""

    @extend_schema(
        operation_id="tools_list",
        parameters=[
            OpenApiParameter("collection", str, required=True, description="Collection slug.")
        ],
        responses=ToolListSerializer,
    )
    def get(self, request: Request) -> Response:
        name = request.query_params.get("collection")
        if not name:
            raise ValidationError({"collection": ["This query parameter is required."]})
        tools = collection_tools(self.collection_or_404(name), scope=self.scope)
        return Response({"tools": [tool.spec for tool in tools]})


class ToolCallView(ToolCallThrottleMixin, RetrievalAPIMixin, APIView):
    """Run one tool call; the body is the tool's JSON result, errors included.

    A tool error (bad arguments, a document that cannot be indexed) is a 200 whose
    result is ``{"error": ...}``, exactly what the model should see; an unknown tool
    is a 400.
    """

    @extend_schema(
        request=ToolCallSerializer,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT, description='The tool\'s result, or {"error": message}.'
            )
        },
    )
    def post(self, request: Request) -> Response:
        serializer = ToolCallSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        collection = self.collection_or_404(data["collection"])
        tools = {tool.name: tool for tool in collection_tools(collection, scope=self.scope)}
        if data["name"] not in tools:
            raise ValidationError(
                {"name": [f"Unknown tool {data['name']!r}; available: {', '.join(tools)}."]}
            )
        return Response(json.loads(tools[data["name"]].execute(data["arguments"])))
