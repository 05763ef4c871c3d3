"""Grounded answers: the model's citations checked, abstention, faults, the extractive mode."""

from __future__ import annotations

import json

import pytest

import retrieval
from retrieval.exceptions import CollectionNotFound, InvalidComponentError
from retrieval.models import QueryTrace
from retrieval.services.access import Scope
from retrieval.services.answers.service import aanswer, answer, answer_events
from retrieval.services.tools import answer_tool
from tests.conftest import collection_of, run_async
from tests.support.openai_server import hang_fault, status_fault

pytestmark = pytest.mark.django_db

PATH = "/v1/chat/completions"
TEXTS = {
    "tides": "The tides are caused by the gravity of the moon. Sailors watch them closely.",
    "bread": "Bread rises because yeast makes carbon dioxide. Bakers knead the dough.",
    "cats": "Cats sleep for most of the day. They hunt at night.",
}
QUESTION = "What causes the tides?"


@pytest.fixture
def library(keyword_settings, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    collection = collection_of("Library", TEXTS)
    collection.documents.filter(external_id="tides").update(
        metadata={"url": "https://example.org/tides"}
    )
    return collection


def ask(**options):
    return answer(QUESTION, collection="Library", scope=Scope.ALL, **options)


def events(result) -> list[str]:
    return [event["stage"] for event in result.trace["events"]]


def test_without_an_llm_the_answer_is_the_passages_best_sentence_cited(library):
    result = ask()
    assert (result.mode, result.abstained, result.reason) == ("extractive", False, "")
    assert result.text.startswith("The tides are caused by the gravity of the moon. [1]")
    first = result.citations[0]
    assert (first.number, first.external_id, first.url) == (1, "tides", "https://example.org/tides")
    assert first.quote == "The tides are caused by the gravity of the moon."
    assert first.document_id == library.documents.get(external_id="tides").pk
    assert first.chunk_ids and result.results


def test_the_llm_answers_from_the_numbered_passages_and_cites_them(library, llm_server):
    llm_server.queue_chat("The gravity of the moon causes the tides [1].")
    result = ask()
    assert (result.mode, result.abstained) == ("llm", False)
    assert result.text == "The gravity of the moon causes the tides [1]."
    assert [c.external_id for c in result.citations] == ["tides"]
    assert result.citations[0].quote == "The tides are caused by the gravity of the moon."
    sent = llm_server.requests_to(PATH)[0].body["messages"]
    assert "only the numbered passages" in sent[0]["content"]
    assert "[1] " in sent[1]["content"] and QUESTION in sent[1]["content"]
    assert "answer_prompt" in events(result)


def test_a_made_up_citation_is_removed_and_recorded(library, llm_server):
    llm_server.queue_chat("The moon causes the tides [1][7]. Yeast helps too [9].")
    result = ask()
    assert result.text == "The moon causes the tides [1]. Yeast helps too."
    assert [c.number for c in result.citations] == [1]
    assert result.uncited == ("Yeast helps too.",)  # flagged: it cites nothing now
    made_up = [e for e in result.trace["events"] if e["stage"] == "answer_fabricated_citations"]
    assert made_up == [{"stage": "answer_fabricated_citations", "numbers": [7, 9]}]
    row = QueryTrace.objects.get(pk=result.trace_id)
    assert row.source == QueryTrace.Source.ANSWER
    stored = [e for e in row.trace["events"] if e["stage"] == "answer"][0]
    assert stored["text"] == result.text and stored["citations"][0]["number"] == 1


def test_the_answer_abstains_when_the_model_says_the_passages_do_not_answer(library, llm_server):
    llm_server.queue_chat("NOT IN PASSAGES")
    result = ask()
    assert result.abstained and result.mode == "llm" and not result.citations
    assert "do not answer" in result.reason
    assert "tides" in [item["document"] for item in result.closest]


def test_the_answer_abstains_below_the_score_floor_without_asking_the_model(library, llm_server):
    result = ask(min_score=1e9)
    assert result.abstained and "min_score" in result.reason
    assert result.closest  # the closest documents are listed
    assert llm_server.requests_to(PATH) == []


def test_a_question_no_sentence_matches_abstains_in_extractive_mode(library):
    result = answer("zebra quantum", collection="Library", scope=Scope.ALL)
    assert result.abstained and result.mode == "extractive"


@pytest.mark.parametrize("fault", ["hang", "error"])
def test_a_hanging_or_failing_llm_gives_the_extractive_answer_with_the_reason(
    library, llm_server, retrieval_settings, fault
):
    retrieval_settings(
        LLMS={
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": {
                    "model": "m",
                    "base_url": llm_server.base_url,
                    "timeout": 0.3,
                    "max_retries": 1,
                },
            }
        }
    )
    faults = [hang_fault()] * 3 if fault == "hang" else [status_fault(500)] * 3
    llm_server.fail_next(*faults, path=PATH)
    result = ask()
    assert (result.mode, result.abstained) == ("extractive", False)
    assert result.reason.startswith("The LLM gave no answer")
    assert ("timed out" in result.reason) == (fault == "hang")
    assert result.citations[0].external_id == "tides"
    assert "answer_fallback" in events(result)
    assert result.trace["llm_calls"][0]["error"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Probably the wind, I think.", "cited no passage"),
        ("[1][2].", "no text"),
        ("", "cited no passage"),
    ],
)
def test_an_answer_citing_nothing_or_saying_nothing_is_replaced_by_the_extractive_one(
    library, llm_server, reply, reason
):
    llm_server.queue_chat(reply)
    result = ask()
    assert result.mode == "extractive" and reason in result.reason
    assert "[1]" in result.text


def test_extractive_can_be_asked_for_and_an_unknown_llm_is_refused(library, llm_server):
    assert ask(extractive=True).mode == "extractive"
    assert llm_server.requests_to(PATH) == []
    with pytest.raises(InvalidComponentError):
        ask(llm="nope")


@pytest.mark.django_db(transaction=True)  # aanswer's worker thread sees committed rows only
def test_the_facade_and_the_async_answer(library):
    assert retrieval.answer is answer
    later = run_async(aanswer(QUESTION, collection="Library", scope=Scope.ALL))
    assert later.text == ask().text
    with pytest.raises(CollectionNotFound):
        answer(QUESTION, collection="Nowhere", scope=Scope.ALL)
    with pytest.raises(ValueError):
        answer("  ", collection="Library", scope=Scope.ALL)


def test_the_stream_is_the_checked_text_then_the_citations(library):
    result = ask()
    stream = list(answer_events(result))
    assert "".join(data["text"] for kind, data in stream if kind == "token") == result.text
    kind, final = stream[-1]
    assert kind == "answer" and final["citations"][0]["document"] == "tides"
    assert final["trace_id"] == result.trace_id


def test_the_answer_tool_answers_with_citations(library, llm_server):
    llm_server.queue_chat("The moon's gravity [1].")
    tool = answer_tool(collection="Library", scope=Scope.ALL)
    assert tool.spec["function"]["name"] == "answer"
    body = json.loads(tool.execute({"question": QUESTION}))
    assert body["text"] == "The moon's gravity [1]." and not body["abstained"]
    assert body["citations"][0]["document"] == "tides"
    assert "error" in json.loads(tool.execute({"question": ""}))
    row = QueryTrace.objects.latest("pk")
    assert [e["face"] for e in row.trace["events"] if e["stage"] == "answer"] == ["tool"]


def test_the_sample_documents_answer_a_question_offline(sample_handbook):
    # What ``dev.py demo`` shows: no LLM, no network, an answer with its citations; the
    # FAQ's answer is the sentence under the question, which shares none of its words.
    sample_handbook("faq.md")
    result = answer("Which databases are supported?", collection="handbook", scope=Scope.ALL)
    assert (result.mode, result.abstained) == ("extractive", False)
    assert "PostgreSQL with the pgvector extension" in result.text
    assert result.citations and result.citations[0].quote in result.text


def test_the_prompt_is_fitted_to_the_llms_context_window(library, llm_server, retrieval_settings):
    fitted(retrieval_settings, llm_server, context_window=300, max_tokens=100)
    llm_server.queue_chat("The moon [1].")
    result = ask()
    (fit,) = [e for e in result.trace["events"] if e["stage"] == "fit"]
    assert fit["purpose"] == "answer" and fit["dropped"] >= 1 and fit["shown"] >= 1
    sent = llm_server.requests_to(PATH)[0].body
    assert sent["max_tokens"] <= 100
    assert f"[{fit['shown']}] " in sent["messages"][1]["content"]
    assert f"[{fit['shown'] + 1}] " not in sent["messages"][1]["content"]
    assert result.mode == "llm" and result.text == "The moon [1]."


def test_a_prompt_that_cannot_fit_gives_the_extractive_answer(
    library, llm_server, retrieval_settings
):
    fitted(retrieval_settings, llm_server, context_window=256, max_tokens=150)
    result = ask()
    assert result.mode == "extractive" and "does not fit" in result.reason
    assert llm_server.requests_to(PATH) == []


def fitted(retrieval_settings, llm_server, *, context_window: int, max_tokens: int) -> None:
    retrieval_settings(
        LLMS={
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": {
                    "model": "m",
                    "base_url": llm_server.base_url,
                    "context_window": context_window,
                    "max_tokens": max_tokens,
                },
            }
        },
    )
