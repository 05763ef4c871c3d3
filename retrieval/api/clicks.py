"""``POST /api/clicks/``: a reader followed a result of a search the site kept.

The body is ``{"token": ..., "document": <id>}``, the token from the search's results
page (``click.token`` of its JSON form): see :mod:`retrieval.services.results.clicks`.
Every click with a valid token is answered 202 alike, whether it is kept, already
counted, or dropped (a document the reader may not see, or not among the results), so
the answer says nothing of hidden documents; a token that is not valid is a 400. Form
bodies are read too, for ``navigator.sendBeacon``. Throttled as ``retrieval_click``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from retrieval.services.results.clicks import InvalidClickToken, record_click

from .throttling import ClickThrottleMixin
from .views import RetrievalAPIMixin


class ClickSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=500, help_text="The search's click token.")
    document = serializers.IntegerField(min_value=1, help_text="The followed result's document id.")


class ClickView(ClickThrottleMixin, RetrievalAPIMixin, APIView):
    """Record a click on a search result; answered 202 whether it is kept or not."""

    # A beacon cannot send JSON without a preflight: forms are read whatever the site's
    # DEFAULT_PARSER_CLASSES.
    parser_classes = [JSONParser, FormParser, MultiPartParser]

    def get_permissions(self) -> list[permissions.BasePermission]:
        # The signed token names the reader (or a visitor of a public search page) and
        # is checked against the request's user.
        return [permissions.AllowAny()]

    @extend_schema(
        request=ClickSerializer,
        responses={
            202: OpenApiResponse(description="Accepted (kept, already counted or dropped)."),
            400: OpenApiResponse(description="No token or document, or a token not valid."),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = ClickSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            record_click(data["token"], data["document"], scope=self.scope)
        except InvalidClickToken as e:
            raise ValidationError({"token": [str(e)]}) from e
        return Response(status=status.HTTP_202_ACCEPTED)
