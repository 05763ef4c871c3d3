"""POST /api/answer/: the answer as JSON or server-sent events, refusals, throttling."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import override_settings
from rest_framework.test import APIClient

from retrieval.models import Document, QueryTrace
from retrieval.services.results.page import document_url as tides_url
from tests.conftest import collection_of
from tests.support.openai_server import hang_fault, stream_fault

pytestmark = pytest.mark.django_db

PATH = "/v1/chat/completions"
TEXTS = {
    "tides": "The tides are caused by the gravity of the moon. Sailors watch them closely.",
    "bread": "Bread rises because yeast makes carbon dioxide. Bakers knead the dough.",
}
BODY = {"question": "What causes the tides?", "collection": "library"}


@pytest.fixture
def api(keyword_settings, retrieval_settings) -> APIClient:
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    collection_of("library", TEXTS)
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user(username="reader"))
    return client


def events(response) -> list[tuple[str, dict]]:
    """Parse a text/event-stream body into (event, data) pairs."""
    body = b"".join(response.streaming_content).decode()
    pairs = []
    for message in body.split("\n\n"):
        if message.strip():
            kind, data = message.split("\n", 1)
            pairs.append((kind.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return pairs


def test_the_answer_comes_as_json_with_citations_and_its_trace(api, llm_server):
    llm_server.queue_chat("The moon's gravity causes the tides [1][4].")
    response = api.post("/api/answer/", BODY, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["text"] == "The moon's gravity causes the tides [1]."
    assert (body["mode"], body["abstained"]) == ("llm", False)
    assert [c["document"] for c in body["citations"]] == ["tides"]
    trace = QueryTrace.objects.get(pk=body["trace_id"])
    assert trace.source == QueryTrace.Source.ANSWER
    face = [e for e in trace.trace["events"] if e["stage"] == "answer"][0]["face"]
    assert face == "api"


def test_a_streamed_answer_sends_tokens_then_the_citations_and_trace_id(api, llm_server):
    llm_server.queue_chat("The moon's gravity causes the tides [1].")
    response = api.post("/api/answer/", {**BODY, "stream": True}, format="json")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    sent = events(response)
    tokens = [data["text"] for kind, data in sent if kind == "token"]
    assert len(tokens) > 1 and "".join(tokens) == "The moon's gravity causes the tides [1]."
    kind, final = sent[-1]
    assert kind == "answer" and final["citations"][0]["document"] == "tides"
    assert QueryTrace.objects.filter(pk=final["trace_id"]).exists()
    (source,) = final["sources"]  # linked as the search page links it
    tides = Document.objects.get(external_id="tides")
    assert source["number"] == 1 and source["url"].startswith(tides_url(tides))


def test_a_hanging_llm_streams_the_extractive_answer_with_the_reason(
    api, llm_server, retrieval_settings
):
    retrieval_settings(
        LLMS={
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": {"model": "m", "base_url": llm_server.base_url, "timeout": 0.3},
            }
        }
    )
    llm_server.fail_next(*[hang_fault()] * 3, path=PATH)
    response = api.post("/api/answer/", {**BODY, "stream": True}, format="json")
    assert response.status_code == 200
    final = events(response)[-1][1]
    assert final["mode"] == "extractive" and "timed out" in final["reason"]
    assert final["citations"][0]["document"] == "tides"


def test_the_stream_carries_the_models_tokens_and_never_a_made_up_citation(api, llm_server):
    llm_server.queue_chat("The moon's gravity [3] causes the tides [1].")
    sent = events(api.post("/api/answer/", {**BODY, "stream": True}, format="json"))
    tokens = [data["text"] for kind, data in sent if kind == "token"]
    assert "".join(tokens) == "The moon's gravity causes the tides [1]."
    assert llm_server.requests_to(PATH)[0].body["stream"] is True
    assert sent[-1][1]["mode"] == "llm" and sent[-1][1]["text"] == "".join(tokens)


def test_a_server_failing_mid_stream_ends_in_the_extractive_answer_not_a_500(api, llm_server):
    llm_server.queue_chat("The moon's gravity causes the tides [1].")
    llm_server.fail_next(stream_fault(after=2, then="error"), path=PATH)
    response = api.post("/api/answer/", {**BODY, "stream": True}, format="json")
    assert response.status_code == 200
    kinds = [kind for kind, data in events(response)]
    assert kinds[0] == "token" and "reset" in kinds and kinds[-1] == "answer"


def test_without_an_llm_the_api_answers_extractively(api):
    body = api.post("/api/answer/", BODY, format="json").json()
    assert body["mode"] == "extractive" and body["text"].endswith("[1]")


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"collection": "nowhere"}, 404),
        ({"question": ""}, 400),
        ({"llm": "nope"}, 400),
        ({"retriever": "nope"}, 400),
        ({"top_k": 0}, 400),
        ({"pipeline": "default", "retriever": "dense"}, 400),
    ],
)
def test_bad_requests_are_refused_with_a_reason(api, change, status):
    response = api.post("/api/answer/", {**BODY, **change}, format="json")
    assert response.status_code == status, response.content


def test_anonymous_callers_are_refused(api):
    assert APIClient().post("/api/answer/", BODY, format="json").status_code in (401, 403)


def test_answers_are_throttled_as_searches(api):
    rest = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"retrieval_search": "2/min"}}
    with override_settings(REST_FRAMEWORK=rest):
        cache.clear()
        statuses = [api.post("/api/answer/", BODY, format="json").status_code for _ in range(3)]
    cache.clear()
    assert statuses == [200, 200, 429]


def test_a_failure_once_the_stream_started_is_an_error_event():
    from retrieval.api.answers import server_sent_events
    from retrieval.exceptions import ServiceUnavailableError

    def failing():
        yield "token", {"text": "The"}
        raise ServiceUnavailableError("the embedder is down")

    sent = list(server_sent_events(failing()))
    assert sent[0].startswith("event: token")
    kind, data = sent[1].split("\n", 1)
    assert (
        kind == "event: error" and json.loads(data.removeprefix("data: ").strip())["status"] == 503
    )


def test_a_client_accepting_only_event_streams_gets_the_stream_or_an_error_event(api):
    response = api.post(
        "/api/answer/", {**BODY, "stream": True}, format="json", HTTP_ACCEPT="text/event-stream"
    )
    assert response.status_code == 200 and events(response)[-1][0] == "answer"
    refused = api.post(
        "/api/answer/",
        {**BODY, "collection": "nowhere", "stream": True},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert refused.status_code == 404
    assert refused.content.decode().startswith("event: error\ndata: {")
