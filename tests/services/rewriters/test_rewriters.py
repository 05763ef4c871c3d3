"""Query rewriters: LLM ones over real HTTP with their fallbacks, and offline RM3 feedback."""

from __future__ import annotations

import json

import pytest

from retrieval.services.query.tracing import traced
from retrieval.services.rewriters.llm import (
    HyDEQueryRewriter,
    LLMQueryRewriter,
    MultiQueryRewriter,
)
from retrieval.services.rewriters.prf import RM3QueryRewriter
from tests.conftest import collection_of
from tests.openai_server import status_fault, truncated

pytestmark = pytest.mark.django_db
PATH = "/v1/chat/completions"
HISTORY = [
    {"role": "user", "content": "Tell me about the Eiffel Tower."},
    {"role": "assistant", "content": "It is a wrought-iron tower in Paris."},
]


@pytest.fixture
def collection(keyword_settings):
    return collection_of(
        "travel",
        {
            "a": "Paris tower iron lattice built 1889.",
            "b": "The tower in Paris has iron stairs.",
            "c": "Rome has ancient ruins and fountains.",
        },
    )


def test_standalone_rewrite_folds_the_history(llm_server, collection):
    llm_server.queue_chat('  "How tall is the Eiffel Tower?"\n')
    with traced() as trace:
        rewrite = LLMQueryRewriter().rewrite(
            "How tall is it?", collection=collection, history=HISTORY
        )
    assert rewrite.queries == ("How tall is the Eiffel Tower?",) and not rewrite.fallback
    prompt = llm_server.requests_to(PATH)[0].body["messages"][0]["content"]
    assert "user: Tell me about the Eiffel Tower." in prompt and "How tall is it?" in prompt
    assert trace.events[0]["stage"] == "rewrite" and trace.events[0]["method"] == "standalone"


@pytest.mark.parametrize("fault", ["empty", "error"])
def test_standalone_rewrite_falls_back_to_the_query(llm_server, collection, fault):
    if fault == "empty":
        llm_server.queue_chat("   ")
    else:
        llm_server.fail_next(*[status_fault(500)] * 3, path=PATH)
    rewrite = LLMQueryRewriter().rewrite("How tall is it?", collection=collection)
    assert rewrite.queries == ("How tall is it?",) and rewrite.fallback
    assert ("nothing" if fault == "empty" else "failed") in rewrite.reason


def test_custom_templates_need_the_query_placeholder():
    with pytest.raises(ValueError, match=r"\{query\}"):
        LLMQueryRewriter(template="Rewrite this.")


def test_multi_query_keeps_the_original_and_drops_duplicates(llm_server, collection):
    answer = {"queries": ["Eiffel tower height", "eiffel TOWER height", "iron tower size"]}
    llm_server.queue_chat(json.dumps(answer))
    rewrite = MultiQueryRewriter(n=3).rewrite("Eiffel tower height", collection=collection)
    assert rewrite.queries == ("Eiffel tower height", "iron tower size")
    llm_server.queue_chat('{"queries": []}', "nope")  # invalid, then invalid after repair
    fallback = MultiQueryRewriter(n=2).rewrite("tower", collection=collection)
    assert fallback.queries == ("tower",) and fallback.fallback
    with pytest.raises(ValueError, match="n must be"):
        MultiQueryRewriter(n=0)


def test_hyde_retrieves_with_a_hypothetical_passage(llm_server, collection):
    llm_server.queue_chat("The tower is 330 metres tall and made of iron.")
    rewrite = HyDEQueryRewriter().rewrite("How tall?", collection=collection)
    assert rewrite.queries == ("How tall?", "The tower is 330 metres tall and made of iron.")
    assert rewrite.details["hypothetical"].startswith("The tower")


def test_rm3_adds_words_of_the_best_chunks_not_the_query(collection):
    rewrite = RM3QueryRewriter(feedback_chunks=2, feedback_terms=3).rewrite(
        "paris tower", collection=collection
    )
    terms = rewrite.details["expansion_terms"]
    assert len(terms) == 3 and "iron" in terms  # in both feedback chunks: the most probable
    assert not {"paris", "tower"} & set(terms)
    assert not {"rome", "ruins", "fountains"} & set(terms)  # not in the feedback chunks
    assert rewrite.queries == ("paris tower " + " ".join(terms),)


def test_rm3_uses_earlier_user_turns_and_needs_no_llm(collection):
    rewrite = RM3QueryRewriter().rewrite(
        "what about its stairs?",
        collection=collection,
        history=[{"role": "user", "content": "the Paris tower"}],
    )
    assert rewrite.queries[0].startswith("the Paris tower what about its stairs?")
    nothing = RM3QueryRewriter().rewrite("zebra", collection=collection)
    assert nothing.fallback and nothing.queries == ("zebra",)


def test_standalone_rewrite_is_the_first_line_even_when_the_rest_was_cut(llm_server, collection):
    # llama.cpp's small models explain the query (or answer it) until max_tokens: the first
    # line is whole, only a cut inside it is a fallback.
    llm_server.queue_chat(truncated('"Eiffel Tower height"\n\nThis query resolves "it" to the'))
    rewrite = LLMQueryRewriter().rewrite("How tall is it?", collection=collection, history=HISTORY)
    assert rewrite.queries == ("Eiffel Tower height",) and not rewrite.fallback
    llm_server.queue_chat(truncated("Eiffel Tower he"))
    rewrite = LLMQueryRewriter().rewrite("How tall is it?", collection=collection, history=HISTORY)
    assert rewrite.queries == ("How tall is it?",) and rewrite.fallback
