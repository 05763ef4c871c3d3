"""The LLM triple extractor over real HTTP: schema-checked triples, one call per chunk."""

from __future__ import annotations

import json

import pytest

from retrieval.exceptions import LLMError
from retrieval.models import IndexRun, Triple
from retrieval.services.extractors.llm import LLMTripleExtractor
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.llms.answers import ANSWER_CHARS
from tests.services.llms.schemas import longest, schema_of
from tests.support.openai_server import OpenAIServer, characters

pytestmark = pytest.mark.django_db
OPENAI_LLM = "retrieval.services.llms.openai.OpenAIChatLLM"


def answer_for(request) -> str:
    """Name the first two capitalised words of the prompted text as a triple."""
    text = request.body["messages"][-1]["content"].split("Text:\n", 1)[1]
    names = [word.strip(".,") for word in text.split() if word[:1].isupper()]
    triples = (
        [{"subject": names[0], "predicate": "relates to", "object": names[1], "confidence": 0.9}]
        if len(names) >= 2
        else []
    )
    return json.dumps({"triples": triples})


def test_triples_come_back_validated_and_normalised(llm_server):
    llm_server.queue_chat(
        json.dumps(
            {
                "triples": [
                    {
                        "subject": " Ada  Lovelace",
                        "predicate": "wrote",
                        "object": "the Notes",
                        "confidence": 0.8,
                    }
                ]
            }
        )
    )
    (triples,) = LLMTripleExtractor().extract(["Ada Lovelace wrote the Notes."])
    assert [(t.subject, t.predicate, t.object, t.confidence) for t in triples] == [
        ("Ada Lovelace", "wrote", "the Notes", 0.8)
    ]
    prompt = llm_server.requests_to("/v1/chat/completions")[0].body["messages"][-1]["content"]
    assert prompt.endswith("Text:\nAda Lovelace wrote the Notes.")


def test_invalid_answers_are_repaired_once_then_fail(llm_server):
    bad = json.dumps({"triples": [{"subject": "A", "predicate": "b", "confidence": 0.5}]})
    llm_server.queue_chat(bad, bad)
    with pytest.raises(LLMError, match="after one repair"):
        LLMTripleExtractor().extract(["A b C."])
    with pytest.raises(ValueError, match=r"\{text\}"):
        LLMTripleExtractor(template="no placeholder")


@pytest.fixture
def people(llm_server, keyword_settings, retrieval_settings):
    """The extractor ``llm``, and a collection of two one-chunk documents."""
    retrieval_settings(
        EXTRACTORS={"llm": {"BACKEND": "retrieval.services.extractors.llm.LLMTripleExtractor"}}
    )
    collection, _ = get_or_create_collection("people")
    ingest(
        collection,
        [
            Source.from_text("Ada met Charles.", external_id="a"),
            Source.from_text("Grace built Mark.", external_id="b"),
        ],
    )
    return collection


def test_extract_graph_calls_the_model_once_per_chunk(llm_server, people):
    llm_server.queue_chat(answer_for, answer_for)
    run = extract_graph(people, extractor="llm")
    assert run.status == IndexRun.Status.SUCCEEDED
    assert len(llm_server.requests_to("/v1/chat/completions")) == 2
    pairs = sorted(Triple.objects.filter(collection=people).values_list("subject", "object"))
    assert pairs == [("Ada", "Charles"), ("Grace", "Mark")]
    assert all(t.chunk_id for t in Triple.objects.all())


def test_changed_only_does_not_select_again_chunks_whose_triples_were_all_rejected(
    llm_server, keyword_settings, retrieval_settings
):
    retrieval_settings(
        EXTRACTORS={"llm": {"BACKEND": "retrieval.services.extractors.llm.LLMTripleExtractor"}}
    )
    collection, _ = get_or_create_collection("loops")
    ingest(collection, [Source.from_text("Ada is Ada.", external_id="a")])
    loop = {"subject": "Ada", "predicate": "is", "object": "ada", "confidence": 1}
    llm_server.queue_chat(json.dumps({"triples": [loop]}))  # a self-loop: rejected
    first = extract_graph(collection, extractor="llm", changed_only=True)
    assert first.documents_indexed == 1 and first.chunks_written == 0
    again = extract_graph(collection, extractor="llm", changed_only=True)
    assert again.documents_total == 0 and again.documents_skipped == 0
    assert len(llm_server.requests_to("/v1/chat/completions")) == 1


def test_a_failing_extraction_logs_one_line_and_the_run_keeps_the_reason(
    llm_server, keyword_settings, retrieval_settings, caplog
):
    retrieval_settings(
        EXTRACTORS={"llm": {"BACKEND": "retrieval.services.extractors.llm.LLMTripleExtractor"}}
    )
    collection, _ = get_or_create_collection("broken")
    ingest(collection, [Source.from_text("Ada met Charles.", external_id="a")])
    llm_server.queue_chat("not json", "still not json")
    with caplog.at_level("WARNING", logger="retrieval.services.graph.extraction"):
        run = extract_graph(collection, extractor="llm")
    assert run.documents_failed == 1 and "after one repair" in run.errors[0]["error"]
    (record,) = [r for r in caplog.records if "Triple extraction failed" in r.getMessage()]
    assert record.exc_info is None  # one line, no traceback per chunk


def test_the_longest_valid_answer_fits_the_tokens_asked_for(keyword_settings, retrieval_settings):
    # Issue 37: SmolLM2 pays a token per character for strings like "1.0.3.4.1.1"; the
    # schema allowed answers of ~1,900 such tokens against the 640 asked for, the answer
    # was cut, and retrieval_extract_graph --extractor llm failed the chunk.
    def longest_answer(request) -> str:
        return json.dumps(longest(schema_of(request)))[: 10**6]

    with OpenAIServer(models=("m",), tokens=characters) as server:
        options = {"model": "m", "base_url": server.base_url, "json_mode": "llama_cpp"}
        retrieval_settings(
            LLMS={"default": {"BACKEND": OPENAI_LLM, "OPTIONS": {**options, "cache": None}}},
            EXTRACTORS={"llm": {"BACKEND": "retrieval.services.extractors.llm.LLMTripleExtractor"}},
        )
        collection, _ = get_or_create_collection("versions")
        ingest(collection, [Source.from_text("Release 1.0.3.4 is out.", external_id="a")])
        server.queue_chat(longest_answer)
        run = extract_graph(collection, extractor="llm", changed_only=True)
        (request,) = server.requests_to("/v1/chat/completions")
    assert run.documents_failed == 0 and run.documents_indexed == 1, run.errors
    assert len(longest_answer(request)) <= request.body["max_tokens"]


def test_confidences_out_of_range_are_clamped_not_failed(llm_server):
    # llama.cpp's JSON grammar does not enforce a number's minimum/maximum: SmolLM2 answered
    # confidence 2 twice, and the whole chunk failed after the repair.
    triple = {"subject": "Ada", "predicate": "wrote", "object": "the Notes"}
    answer = [{**triple, "confidence": 2}, {**triple, "object": "a letter", "confidence": -0.5}]
    llm_server.queue_chat(json.dumps({"triples": answer}))
    (triples,) = LLMTripleExtractor().extract(["Ada wrote the Notes and a letter."])
    assert [(t.object, t.confidence) for t in triples] == [("the Notes", 1.0), ("a letter", 0.0)]
    assert len(llm_server.requests_to("/v1/chat/completions")) == 1


def test_a_confidence_too_large_for_a_float_is_clamped(llm_server):
    # A valid JSON number of 400 digits: float() of it raised OverflowError and the
    # whole chunk failed.
    triple = {"subject": "Ada", "predicate": "wrote", "object": "the Notes"}
    answer = f'{{"triples": [{json.dumps(triple)[:-1]}, "confidence": {"9" * 400}}}]}}'
    llm_server.queue_chat(answer)
    (triples,) = LLMTripleExtractor().extract(["Ada wrote the Notes."])
    assert [(t.object, t.confidence) for t in triples] == [("the Notes", 1.0)]


def test_an_oversized_answer_is_cut_in_the_repair_and_in_every_chunks_error(llm_server, people):
    # A server that ignores max_tokens: 200,000 characters in a subject (too long for the
    # schema). Its whole text went into the repair prompt and each chunk's error.
    huge = {"subject": "x" * 200_000, "predicate": "is", "object": "y", "confidence": 1}
    llm_server.queue_chat(*[json.dumps({"triples": [huge]})] * 4)
    run = extract_graph(people, extractor="llm")
    assert run.documents_failed == 2
    limit = ANSWER_CHARS + 100  # the cut text and what is said around it
    assert all(len(error["error"]) < limit for error in run.errors), run.errors[0]["error"][:300]
    assert "after one repair" in run.errors[0]["error"]
    repair = llm_server.requests_to("/v1/chat/completions")[1].body["messages"]
    assert len(repair[-2]["content"]) < limit  # the answer shown back to the model
