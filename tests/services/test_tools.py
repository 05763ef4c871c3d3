"""Agent tools: specs, argument errors as tool messages, indexing, and a real chat loop."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from retrieval.exceptions import InvalidComponentError
from retrieval.models import Document
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.tools import (
    assistant_message,
    collection_tools,
    index_tool,
    retrieve_tool,
    run_tool_call,
)
from tests.support.openai_server import OpenAIServer, assistant, tool_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def atlas(keyword_settings):
    collection, _ = get_or_create_collection("atlas")
    collection.description = "maps and directions"
    collection.save()
    ingest(
        collection,
        [
            Source.from_text("North is up on the map.", external_id="n", title="North"),
            Source.from_text("East is where the sun rises.", external_id="e"),
        ],
    )
    return collection


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def test_specs_are_openai_function_schemas(atlas):
    retrieve, index = collection_tools(atlas, scope=Scope.ALL)
    assert retrieve.spec == {
        "type": "function",
        "function": {
            "name": "retrieve",
            "description": "Search the 'atlas' collection (maps and directions) and return the "
            "passages that best answer a query, best first.",
            "parameters": {
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
                        "maximum": 20,
                        "default": 5,
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }
    parameters = index.spec["function"]["parameters"]
    assert index.name == "index_document" and parameters["required"] == ["content", "document_id"]
    assert set(parameters["properties"]) == {"content", "document_id", "title"}


def test_retrieve_runs_a_call_and_answers_json(atlas):
    tool = retrieve_tool("dense", collection="atlas", scope=Scope.ALL)
    answer = json.loads(tool.execute('{"query": "north", "top_k": 1}'))
    assert answer == {
        "results": [
            {
                "rank": 1,
                "score": answer["results"][0]["score"],
                "document": "n",
                "title": "North",
                "page": None,
                "heading_path": [],
                "text": "North is up on the map.",
            }
        ]
    }
    # Embedded with its title: "North\n\nNorth is up on the map." is [2,0,1]/√5.
    assert answer["results"][0]["score"] == pytest.approx(2 / 5**0.5)
    assert len(json.loads(tool.execute({"query": "north"}))["results"]) == 2  # default top_k 5


def test_retrieve_with_a_token_budget_answers_a_cited_context(atlas):
    tool = retrieve_tool("dense", collection=atlas, max_tokens=12, scope=Scope.ALL)
    answer = json.loads(tool.execute({"query": "north", "top_k": 2}))
    assert answer["context"] == "[1] North\nNorth is up on the map."
    assert [c["document"] for c in answer["citations"]] == ["n"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"query": "north"', "Arguments of retrieve are not valid JSON"),
        ("[1]", "Arguments of retrieve must be a JSON object."),
        ("", "retrieve needs the argument 'query'."),
        ({"query": "  "}, "Argument 'query' of retrieve must not be empty."),
        ({"query": 3}, "Argument 'query' of retrieve must be a string."),
        ({"query": "x", "top_k": 21}, "Argument 'top_k' of retrieve must be between 1 and 20."),
        ({"query": "x", "top_k": True}, "Argument 'top_k' of retrieve must be an integer."),
        ({"query": "x", "lang": "en"}, "Unknown argument 'lang' for retrieve; expected: query"),
        ('{"query": "\\ud800"}', "Argument 'query' of retrieve is not valid Unicode."),
    ],
)
def test_invalid_arguments_come_back_as_a_tool_error(atlas, arguments, message):
    answer = json.loads(retrieve_tool(collection=atlas, scope=Scope.ALL).execute(arguments))
    assert set(answer) == {"error"} and answer["error"].startswith(message)


def test_index_then_find(atlas):
    tool = index_tool("atlas", scope=Scope.ALL)
    indexed = json.loads(tool.execute({"content": "Up is north.", "document_id": "u"}))
    assert indexed == {"document_id": "u", "status": "indexed", "chunks": 1}
    again = json.loads(tool.execute({"content": "Up is north.", "document_id": "u"}))
    assert again["status"] == "unchanged"
    assert Document.objects.get(external_id="u").content == "Up is north."
    found = json.loads(
        retrieve_tool("bm25", collection=atlas, scope=Scope.ALL).execute({"query": "north"})
    )
    assert {r["document"] for r in found["results"]} == {"n", "u"}
    missing = json.loads(tool.execute({"content": "x"}))
    assert missing == {"error": "index_document needs the argument 'document_id'."}
    nul = json.loads(tool.execute({"content": "x", "document_id": "a\x00"}))
    assert "NUL" in nul["error"] and Document.objects.count() == 3


def test_building_a_tool_names_a_bad_retriever_or_collection(atlas):
    with pytest.raises(InvalidComponentError, match="Unknown retriever 'psychic'"):
        retrieve_tool("psychic", collection=atlas, scope=Scope.ALL)
    with pytest.raises(LookupError, match="No collection named 'nowhere'"):
        index_tool("nowhere", scope=Scope.ALL)


def test_run_tool_call_answers_with_a_tool_message(atlas):
    tools = collection_tools(atlas, scope=Scope.ALL)
    call = tool_call("retrieve", {"query": "east", "top_k": 1}, call_id="call_7")
    message = run_tool_call(tools, call)
    assert message["role"] == "tool" and message["tool_call_id"] == "call_7"
    assert json.loads(message["content"])["results"][0]["document"] == "e"
    unknown = run_tool_call(tools, tool_call("delete_everything", {}, call_id="c"))
    assert json.loads(unknown["content"]) == {
        "error": "Unknown tool 'delete_everything'; available: retrieve, index_document."
    }


def test_an_openai_chat_loop_calls_retrieve_and_sends_the_result_back(atlas, openai_server):
    openai_server.queue_chat(
        assistant(tool_calls=[tool_call("retrieve", {"query": "where does the sun rise"})]),
        "The sun rises in the east [1].",
    )
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="unused", max_retries=0)
    tools = collection_tools(atlas, scope=Scope.ALL)
    messages: list = [{"role": "user", "content": "Where does the sun rise?"}]
    choice = tools[0].choice
    while True:
        reply = client.chat.completions.create(
            model="test-chat",
            messages=messages,
            tools=[tool.spec for tool in tools],
            tool_choice=choice,
        )
        message = reply.choices[0].message
        messages.append(assistant_message(message))
        if not message.tool_calls:
            break
        messages.extend(run_tool_call(tools, call) for call in message.tool_calls)
        choice = "auto"

    assert message.content == "The sun rises in the east [1]."
    first, second = (r.body for r in openai_server.requests_to("/v1/chat/completions"))
    assert [t["function"]["name"] for t in first["tools"]] == ["retrieve", "index_document"]
    sent = second["messages"][-1]
    assert sent["role"] == "tool" and sent["tool_call_id"] == first_call_id(second)
    assert "East is where the sun rises." in sent["content"]


def first_call_id(body: dict) -> str:
    return body["messages"][1]["tool_calls"][0]["id"]


def test_scripted_chat_answers_can_depend_on_the_request(openai_server):
    openai_server.queue_chat(lambda request: "echo: " + request.body["messages"][-1]["content"])
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.choices[0].message.content == "echo: hello"
    assert reply.choices[0].finish_reason == "stop"
    # With nothing queued, the server echoes the last user message.
    again = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "again"}]
    )
    assert again.choices[0].message.content == "again"


def test_the_loop_keeps_content_and_can_force_the_tool(atlas, openai_server):
    openai_server.strict_messages = True  # llama-cpp-python: 500 without assistant content
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="unused", max_retries=0)
    tools = collection_tools(atlas, scope=Scope.ALL)
    call = assistant(tool_calls=[tool_call("retrieve", {"query": "sunrise"}, call_id="c1")])
    openai_server.queue_chat(call)
    messages: list = [{"role": "user", "content": "Where does the sun rise?"}]
    reply = client.chat.completions.create(
        model="m", messages=messages, tools=[t.spec for t in tools], tool_choice=tools[0].choice
    )
    message = reply.choices[0].message
    dropped = [*messages, message.model_dump(exclude_none=True)]
    with pytest.raises(openai.InternalServerError):  # what the old README loop sent
        client.chat.completions.create(model="m", messages=dropped)
    messages.append(assistant_message(message))
    messages.extend(run_tool_call(tools, c) for c in message.tool_calls)
    openai_server.queue_chat("In the east [1].")
    final = client.chat.completions.create(model="m", messages=messages)
    assert final.choices[0].message.content == "In the east [1]."
    first = openai_server.requests_to("/v1/chat/completions")[0].body
    assert first["tool_choice"] == {"type": "function", "function": {"name": "retrieve"}}
    assert messages[1]["content"] == "" and messages[1]["tool_calls"][0]["id"] == "c1"


def test_arguments_with_raw_control_characters_are_accepted(atlas, openai_server):
    # llama.cpp's JSON grammar let a raw line break into SmolLM2's "query" string; the call
    # came back as "not valid JSON" instead of running.
    raw = '{"query": "where does\nthe sun rise", "top_k": 1}'
    openai_server.queue_chat(assistant(tool_calls=[tool_call("retrieve", raw, call_id="c1")]))
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="unused", max_retries=0)
    tools = collection_tools(atlas, scope=Scope.ALL)
    reply = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Where does the sun rise?"}],
        tools=[t.spec for t in tools],
        tool_choice=tools[0].choice,
    )
    (call,) = reply.choices[0].message.tool_calls
    answer = json.loads(run_tool_call(tools, call)["content"])
    assert "error" not in answer
    assert "East is where the sun rises." in json.dumps(answer)
