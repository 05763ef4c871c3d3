"""Agent tools: OpenAI function-calling specs for search and indexing, with their executors.

A :class:`Tool` has a ``spec`` to pass in a chat request's ``tools`` list and an
``execute(arguments)`` that runs the call the model made (its JSON arguments) and
returns the JSON string to send back as the ``tool`` message. Invalid arguments and
errors the model can act on come back as ``{"error": "..."}``, never as exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.exceptions import AccessDenied, InvalidComponentError, RetrievalError
from retrieval.models import Collection, Document, QueryTrace
from retrieval.services.access import Scope, resolve_scope
from retrieval.services.answers.service import answer
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import traced
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.query.hiding import with_editors_rules
from retrieval.services.query.packing import pack_context
from retrieval.services.query.pipelines import retriever_alias
from retrieval.services.query.search_log import record_search, traced_as
from retrieval.services.registry import retrievers
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.types import RetrievalResult
from retrieval.validation import nesting

__all__ = [
    "Tool",
    "answer_tool",
    "ToolError",
    "collection_tools",
    "index_tool",
    "retrieve_tool",
    "run_tool_call",
]


class ToolError(RetrievalError):
    """A tool call the model should correct: bad arguments, a document that failed."""


@dataclass(frozen=True)
class Tool:
    """A function a model may call: its JSON-schema ``parameters`` and what runs it.

    ``function`` receives the validated arguments (defaults filled in) and returns a
    JSON-able result.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[[dict[str, Any]], Any] = field(repr=False)

    @property
    def spec(self) -> dict[str, Any]:
        """Return the tool in OpenAI's function-calling format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }

    @property
    def choice(self) -> dict[str, Any]:
        """Return the ``tool_choice`` that makes the model call this tool.

        Small local models (llama.cpp) often call a tool only when it is named here.
        """
        return {"type": "function", "function": {"name": self.name}}

    def execute(self, arguments: str | Mapping[str, Any] | None) -> str:
        """Run a call with the model's ``arguments`` (a JSON string or an object).

        Return the result as a JSON string; a problem the model can fix is
        ``{"error": message}``.
        """
        try:
            result = self.function(validate_arguments(self.name, self.parameters, arguments))
        except (RetrievalError, ValueError) as e:
            return json.dumps({"error": str(e)}, ensure_ascii=False)
        return json.dumps(result, ensure_ascii=False)


def validate_arguments(
    name: str, schema: Mapping[str, Any], arguments: str | Mapping[str, Any] | None
) -> dict[str, Any]:
    """Check ``arguments`` against the flat object ``schema`` the tools here use."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    if isinstance(arguments, str):
        try:
            # strict=False: llama.cpp's JSON grammar lets raw control characters into strings
            arguments = nesting.loads(arguments, where=f"Arguments of {name}", strict=False)
        except json.JSONDecodeError as e:
            raise ToolError(f"Arguments of {name} are not valid JSON: {e}.") from e
        except nesting.TooDeepError as e:
            raise ToolError(str(e)) from e
    if not isinstance(arguments, Mapping):
        raise ToolError(f"Arguments of {name} must be a JSON object.")
    properties: Mapping[str, Any] = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ToolError(
            f"Unknown argument {', '.join(map(repr, unknown))} for {name}; "
            f"expected: {', '.join(properties)}."
        )
    values: dict[str, Any] = {}
    for key, rule in properties.items():
        if key not in arguments or arguments[key] is None:
            if key in schema.get("required", ()):
                raise ToolError(f"{name} needs the argument {key!r}.")
            if "default" in rule:
                values[key] = rule["default"]
            continue
        values[key] = _check_value(name, key, rule, arguments[key])
    return values


def _check_value(name: str, key: str, rule: Mapping[str, Any], value: Any) -> Any:
    kind = rule.get("type")
    if kind == "string":
        if not isinstance(value, str):
            raise ToolError(f"Argument {key!r} of {name} must be a string.")
        if len(value.strip()) < rule.get("minLength", 0):
            raise ToolError(f"Argument {key!r} of {name} must not be empty.")
        if len(value) > rule.get("maxLength", len(value)):
            raise ToolError(f"Argument {key!r} of {name} is over {rule['maxLength']} characters.")
        if "\x00" in value:
            raise ToolError(f"Argument {key!r} of {name} must not contain NUL characters.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:  # a lone surrogate from a JSON \ud800 escape
            raise ToolError(f"Argument {key!r} of {name} is not valid Unicode.") from e
    elif kind == "integer":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ToolError(f"Argument {key!r} of {name} must be an integer.")
        low, high = rule.get("minimum"), rule.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ToolError(f"Argument {key!r} of {name} must be between {low} and {high}.")
    return value


def _compact(result: RetrievalResult) -> dict[str, Any]:
    chunk = result.chunk
    return {
        "rank": result.rank + 1,
        "score": round(result.score, 6),
        "document": chunk.document.external_id,
        "title": chunk.document.title,
        "page": chunk.page,
        "heading_path": list(chunk.heading_path),
        "text": chunk.content,
        **({"promoted": True} if result.metadata.get("promoted") else {}),
    }


def retrieve_tool(
    retriever: str | BaseRetriever | None = None,
    *,
    collection: Collection | str,
    user: Any = None,
    scope: Scope | None = None,
    name: str = "retrieve",
    description: str | None = None,
    top_k: int = 5,
    max_top_k: int = 20,
    max_tokens: int | None = None,
    filters: Filters | Mapping[str, Any] | None = None,
) -> Tool:
    """Return a tool that searches ``collection`` (arguments ``query``, ``top_k``).

    :param retriever: a retriever alias or instance (default: the collection's).
    :param user: the user the tool searches for; or ``scope`` (``Scope.ALL`` explicitly):
        one is required, and every call searches only what it may see.
    :param max_tokens: if given, the result is one context string of at most that many
        tokens with numbered citations (see :func:`pack_context`), else a list of passages.
    """
    allowed = resolve_scope(scope, user, caller="retrieve_tool")
    target = allowed.collection(collection)
    engine = retriever if isinstance(retriever, BaseRetriever) else None
    label = type(retriever).__name__
    if engine is None:
        alias = label = retriever_alias(target, retriever)
        if alias not in retrievers:
            raise InvalidComponentError(
                f"Unknown retriever {alias!r}; configured: {', '.join(retrievers.aliases())}."
            )
        engine = retrievers[alias]
    parsed = allowed.filters(filters)
    if not 1 <= top_k <= max_top_k:
        raise ValueError(f"top_k must be between 1 and max_top_k ({max_top_k}), not {top_k!r}.")

    def run(arguments: dict[str, Any]) -> dict[str, Any]:
        with traced() as trace:  # an LLM-backed retriever charges the query's budget and trace
            results = with_editors_rules(
                arguments["query"],
                lambda k: engine.retrieve(
                    arguments["query"], collection=target, top_k=k, filters=parsed
                ),
                collection=target,
                filters=parsed,
                top_k=arguments["top_k"],
            )
        with traced_as(QueryTrace.Source.TOOL):
            record_search(  # a tool called inside an agent's search joins that search's trace
                arguments["query"],
                collection=target,
                pipeline=f"tool {name}: {label}",
                top_k=arguments["top_k"],
                filters=filters,
                results=results,
                trace=trace.to_dict(),
                user=allowed.user,
            )
        if max_tokens is None:
            return {"results": [_compact(result) for result in results]}
        packed = pack_context(results, max_tokens=max_tokens)
        return {
            "context": packed.text,
            "citations": [citation.to_dict() for citation in packed.citations],
        }

    parameters = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What to look for, in natural language.",
                "minLength": 1,
            },
            "top_k": {
                "type": "integer",
                "description": "How many passages to return.",
                "minimum": 1,
                "maximum": max_top_k,
                "default": top_k,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    about = target.description or target.name
    return Tool(
        name=name,
        description=description
        or f"Search the {target.name!r} collection ({about}) and return the passages "
        "that best answer a query, best first.",
        parameters=parameters,
        function=run,
    )


def answer_tool(
    *,
    collection: Collection | str,
    user: Any = None,
    scope: Scope | None = None,
    name: str = "answer",
    description: str | None = None,
    pipeline: str | None = None,
    retriever: str | None = None,
    llm: str | None = None,
    extractive: bool = False,
    filters: Filters | Mapping[str, Any] | None = None,
) -> Tool:
    """Return a tool that answers a ``question`` from ``collection``, citing its passages
    (see :func:`~retrieval.services.answers.service.answer`).

    ``user`` or ``scope`` is required, as for :func:`retrieve_tool`: every answer is made
    of what it may see. The result is the answer's text, its citations, and whether it
    abstained (with the closest documents).
    """
    allowed = resolve_scope(scope, user, caller="answer_tool")
    target = allowed.collection(collection)
    options = {"pipeline": pipeline, "retriever": retriever, "llm": llm, "filters": filters}

    def run(arguments: dict[str, Any]) -> dict[str, Any]:
        with traced_as(QueryTrace.Source.TOOL):
            result = answer(
                arguments["question"],
                collection=target,
                scope=allowed,
                extractive=extractive,
                **options,
            )
        body = result.to_dict()
        return {key: body[key] for key in ("text", "citations", "abstained", "reason", "closest")}

    parameters = {
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "description": "The question to answer, in natural language.",
                "minLength": 1,
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    about = target.description or target.name
    return Tool(
        name=name,
        description=description
        or f"Answer a question from the {target.name!r} collection ({about}), citing the "
        "passages the answer rests on as [n]; says so when they do not answer it.",
        parameters=parameters,
        function=run,
    )


def index_tool(
    collection: Collection | str,
    *,
    user: Any = None,
    scope: Scope | None = None,
    name: str = "index_document",
    description: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Tool:
    """Return a tool that indexes a text into ``collection`` now (``content``, ``document_id``).

    Indexing a ``document_id`` again replaces that document; unchanged text is skipped.
    ``user`` or ``scope`` is required: a collection they may not see is unknown, and each
    call is a write the access policy must allow (adding, or changing to replace).
    """
    allowed = resolve_scope(scope, user, caller="index_tool")
    target = allowed.collection(collection)

    def run(arguments: dict[str, Any]) -> dict[str, Any]:
        external_id = arguments["document_id"]
        exists = Document.objects.filter(collection=target, external_id=external_id).exists()
        try:
            allowed.authorize("change" if exists else "add", Document, target)
        except AccessDenied as e:
            raise ToolError(str(e)) from e
        source = Source.from_text(
            arguments["content"],
            external_id=external_id,
            title=arguments.get("title", ""),
            metadata=dict(metadata or {}),
        )
        index_run = ingest(target, [source])
        document = Document.objects.filter(collection=target, external_id=external_id).first()
        if index_run.documents_failed or document is None:
            reason = document.error if document is not None else index_run.message
            raise ToolError(f"Document {external_id!r} could not be indexed: {reason}")
        return {
            "document_id": external_id,
            "status": "unchanged" if index_run.documents_skipped else "indexed",
            "chunks": document.chunks.count(),
        }

    parameters = {
        "type": "object",
        "properties": {
            "content": {"type": "string", "description": "The text to index.", "minLength": 1},
            "document_id": {
                "type": "string",
                "description": "A stable id for the document; the same id replaces it.",
                "minLength": 1,
                "maxLength": 1000,
            },
            "title": {"type": "string", "description": "Optional title.", "maxLength": 1000},
        },
        "required": ["content", "document_id"],
        "additionalProperties": False,
    }
    return Tool(
        name=name,
        description=description
        or f"Add a text document to the {target.name!r} collection so later searches find it.",
        parameters=parameters,
        function=run,
    )


def collection_tools(
    collection: Collection | str, *, user: Any = None, scope: Scope | None = None
) -> list[Tool]:
    """Return the standard tools of a collection: ``retrieve``, and ``index_document``
    where the user may add documents to it.

    ``user`` or ``scope`` is required (see :func:`retrieve_tool`).
    """
    allowed = resolve_scope(scope, user, caller="collection_tools")
    target = allowed.collection(collection)
    tools = [retrieve_tool(collection=target, scope=allowed)]
    if allowed.may_write("add", Document, target):
        tools.append(index_tool(target, scope=allowed))
    return tools


def assistant_message(message: Any) -> dict[str, Any]:
    """Return an assistant reply (the ``openai`` client's message) as a dict to send back.

    ``content`` is kept (``""`` when the reply only calls tools): ``model_dump(exclude_none=True)``
    drops it, and some servers (llama-cpp-python) answer 500 to a message without it.
    """
    data = (
        message.model_dump(exclude_none=True) if hasattr(message, "model_dump") else dict(message)
    )
    data["content"] = data.get("content") or ""
    return data


def run_tool_call(tools: Sequence[Tool], tool_call: Any) -> dict[str, str]:
    """Run one tool call of a chat completion; return the ``tool`` message that answers it.

    ``tool_call`` is the ``openai`` client's object or its dict form
    (``{"id", "function": {"name", "arguments"}}``).
    """
    if isinstance(tool_call, Mapping):
        call_id, function = tool_call.get("id", ""), tool_call.get("function", {})
        name, arguments = function.get("name"), function.get("arguments")
    else:
        call_id, name = tool_call.id, tool_call.function.name
        arguments = tool_call.function.arguments
    by_name = {tool.name: tool for tool in tools}
    if name in by_name:
        content = by_name[name].execute(arguments)
    else:
        content = json.dumps(
            {"error": f"Unknown tool {name!r}; available: {', '.join(by_name)}."},
            ensure_ascii=False,
        )
    return {"role": "tool", "tool_call_id": call_id, "content": content}
