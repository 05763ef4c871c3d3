"""Answers valid under the JSON schemas the LLM stages send: drawn by hypothesis, or the
longest one a schema allows."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import strategies as st

#: Any character JSON can carry: NUL, control characters, lone surrogates included.
ANY_CHAR = st.characters(codec=None, categories=None)
#: Characters a model writes as themselves (no JSON escape), so one token each at most.
PLAIN_CHAR = st.characters(min_codepoint=0x20, exclude_characters='"\\\x7f')


def answers(schema: dict[str, Any], chars: st.SearchStrategy[str] = ANY_CHAR) -> Any:
    """Return a strategy of values valid under ``schema`` (the subset the app uses).

    Integers are drawn as ints and as integer-valued floats (``1.0``), which JSON
    Schema counts as integers.
    """
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {name: answers(sub, chars) for name, sub in properties.items() if name in required},
            optional={
                name: answers(sub, chars)
                for name, sub in properties.items()
                if name not in required
            },
        )
    if kind == "array":
        return st.lists(
            answers(schema.get("items", {}), chars),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 8),
        )
    if kind == "string":
        return st.text(chars, min_size=schema.get("minLength", 0), max_size=schema["maxLength"])
    if kind == "integer":
        whole = st.integers(schema.get("minimum", -(10**6)), schema.get("maximum", 10**6))
        return whole | whole.map(float)
    if kind == "number":
        return st.floats(
            schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False
        )
    raise AssertionError(f"no strategy for {schema!r}")


def longest(schema: dict[str, Any], char: str = "1.") -> Any:
    """Return the longest value ``schema`` allows, strings of ``char`` repeated ("1.1.1.1"
    costs a small model a token per character)."""
    kind = schema.get("type")
    if kind == "object":
        return {name: longest(sub, char) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [longest(schema["items"], char) for _ in range(schema["maxItems"])]
    if kind == "string":
        return (char * schema["maxLength"])[: schema["maxLength"]]
    if kind == "integer":
        return float(max(abs(schema["minimum"]), abs(schema["maximum"])))  # "999.0"
    if kind == "number":  # the longest repr of a double, else a long one in range
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        for value in (-2.2250738585072014e-308, 0.30000000000000004):
            if low <= value <= high:
                return value
        return low
    raise AssertionError(f"no longest value for {schema!r}")


def schema_of(request: Any) -> dict[str, Any] | None:
    """Return the schema a chat request asks its answer to match (from its system message)."""
    for message in request.body["messages"]:
        content = str(message.get("content") or "")
        marker = "matching this JSON schema: "
        if message.get("role") == "system" and marker in content:
            return json.loads(content.split(marker, 1)[1])
    return None
