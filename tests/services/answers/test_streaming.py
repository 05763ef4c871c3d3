"""Streamed answers: the model's tokens as they come, its citations held back until
checked, and faults mid-stream ending in the extractive answer within the budget."""

from __future__ import annotations

import pytest

from retrieval.exceptions import CollectionNotFound
from retrieval.models import QueryTrace
from retrieval.services.access import Scope
from retrieval.services.answers.grounding import MarkerGate, check_citations
from retrieval.services.answers.service import answer_stream
from tests.conftest import collection_of
from tests.support.openai_server import stream_fault

pytestmark = pytest.mark.django_db

PATH = "/v1/chat/completions"
TEXTS = {
    "tides": "The tides are caused by the gravity of the moon. Sailors watch them closely.",
    "bread": "Bread rises because yeast makes carbon dioxide. Bakers knead the dough.",
}
QUESTION = "What causes the tides?"


@pytest.fixture
def library(keyword_settings, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    return collection_of("Library", TEXTS)


def stream(**options) -> list[tuple[str, dict]]:
    return list(answer_stream(QUESTION, collection="Library", scope=Scope.ALL, **options))


def tokens(events) -> list[str]:
    return [data["text"] for kind, data in events if kind == "token"]


def test_the_models_tokens_stream_as_they_come_then_the_checked_answer(library, llm_server):
    llm_server.queue_chat("The gravity of the moon causes the tides [1].")
    sent = stream()
    assert llm_server.requests_to(PATH)[0].body["stream"] is True
    assert len(tokens(sent)) == 9  # a word at a time, as the server wrote them
    assert "".join(tokens(sent)) == "The gravity of the moon causes the tides [1]."
    kind, final = sent[-1]
    assert kind == "answer" and final.mode == "llm"
    assert [c.external_id for c in final.citations] == ["tides"]
    row = QueryTrace.objects.get(pk=final.trace_id)
    assert row.source == QueryTrace.Source.ANSWER
    assert row.trace["llm_calls"][0]["completion_tokens"] == 9


def test_a_made_up_citation_never_reaches_the_stream(library, llm_server):
    llm_server.queue_chat("The moon causes the tides [1][7]. Yeast helps too [9].")
    sent = stream()
    assert "".join(tokens(sent)) == "The moon causes the tides [1]. Yeast helps too."
    assert not any("7" in t or "9" in t for t in tokens(sent))
    final = sent[-1][1]
    assert final.text == "The moon causes the tides [1]." + " Yeast helps too."
    assert [c.number for c in final.citations] == [1]


def test_an_abstaining_model_streams_none_of_its_words(library, llm_server):
    llm_server.queue_chat("NOT IN PASSAGES")
    sent = stream()
    assert "".join(tokens(sent)) == "The passages found do not answer this question."
    assert sent[-1][1].abstained and not any(kind == "reset" for kind, _ in sent)


@pytest.mark.parametrize("then", ["hang", "error", "drop"])
def test_a_fault_mid_stream_resets_to_the_extractive_answer(
    library, llm_server, retrieval_settings, then
):
    retrieval_settings(
        LLMS={
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": {"model": "m", "base_url": llm_server.base_url, "timeout": 0.5},
            }
        }
    )
    llm_server.queue_chat("The gravity of the moon causes the tides [1].")
    llm_server.fail_next(stream_fault(after=3, then=then), path=PATH)
    sent = stream()
    kinds = [kind for kind, _ in sent]
    reset = kinds.index("reset")
    assert "".join(tokens(sent[:reset])) == "The gravity"
    assert sent[reset][1]["reason"].startswith("The LLM gave no answer")
    final = sent[-1][1]
    assert final.mode == "extractive" and final.reason == sent[reset][1]["reason"]
    assert "".join(tokens(sent[reset:])) == final.text
    assert final.citations[0].external_id == "tides"
    row = QueryTrace.objects.get(pk=final.trace_id)
    assert row.trace["llm_calls"][0]["error"]


def test_bad_arguments_are_refused_before_the_stream_starts(library):
    with pytest.raises(CollectionNotFound):
        answer_stream(QUESTION, collection="Nowhere", scope=Scope.ALL)
    with pytest.raises(ValueError):
        answer_stream(" ", collection="Library", scope=Scope.ALL)


@pytest.mark.parametrize("size", [1, 2, 5, 100])
@pytest.mark.parametrize(
    "reply",
    [
        "North is up [1][4]. South [2, 9] is down [9].",
        "A [note] and [1",
        "Up [123456789] there [2].",
        "NOT IN PASSAGES.",
        "NOT the wind [1].",
    ],
)
def test_the_gate_shows_what_checking_the_whole_reply_shows(reply, size):
    gate = MarkerGate({1, 2})
    pieces = [gate.feed(reply[i : i + size]) for i in range(0, len(reply), size)]
    shown = "".join(pieces) + gate.close()
    expected = "" if reply.startswith("NOT IN") else check_citations(reply, {1, 2}).text
    assert shown == expected
