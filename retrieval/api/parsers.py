"""JSON in, bounded: request bodies and JSON fields nested too deep are a 400, never a 500.

DRF's ``JSONParser`` and ``JSONField`` let ``RecursionError`` through (a body nested a
few thousand levels deep); these refuse it, and anything past ``MAX_JSON_DEPTH``.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser

from retrieval.validation.nesting import (
    TooDeepError,
    max_json_depth,
    refuse_too_deep,
    too_deep_message,
)

#: A body's own object, and the filters object around their metadata, sit above the
#: values MAX_JSON_DEPTH bounds.
BODY_LEVELS = 2


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser answering 400 to a body nested past ``MAX_JSON_DEPTH`` + 2."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = max_json_depth() + BODY_LEVELS
        try:
            data = super().parse(stream, media_type, parser_context)
            refuse_too_deep(data, "The JSON body", limit=limit)
        except RecursionError:
            message = too_deep_message("The JSON body", limit)
            raise ParseError(f"JSON parse error - {message}") from None
        except TooDeepError as e:
            raise ParseError(f"JSON parse error - {e}") from None
        return data


def bounded_parsers(view: Any) -> list[BaseParser]:
    """Return ``view``'s parsers with DRF's ``JSONParser`` replaced by the bounded one.

    Meant as a view's ``get_parsers``: the host's ``DEFAULT_PARSER_CLASSES`` (or the
    view's ``parser_classes``) keep deciding which media types are read.
    """
    return [
        BoundedJSONParser() if parser is JSONParser else parser() for parser in view.parser_classes
    ]


class BoundedJSONField(serializers.JSONField):
    """A ``JSONField`` whose form input (a JSON string) is read as a JSON body is.

    The value's own bound (metadata, filters) is the serializer's or the service's.
    """

    def to_internal_value(self, data: Any) -> Any:
        where, limit = self.field_name or "The value", max_json_depth() + BODY_LEVELS
        try:
            value = super().to_internal_value(data)
            refuse_too_deep(value, where, limit=limit)
        except RecursionError:
            raise serializers.ValidationError(too_deep_message(where, limit)) from None
        except TooDeepError as e:
            raise serializers.ValidationError(str(e)) from None
        return value
