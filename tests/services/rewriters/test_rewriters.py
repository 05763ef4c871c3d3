"""Query rewriters: LLM ones over real HTTP with their fallbacks, and offline RM3 feedback."""

from __future__ import annotations

import json

import pytest

from retrieval.services.access import Scope
from retrieval.services.core.tracing import traced
from retrieval.services.llms.answers import ANSWER_CHARS
from retrieval.services.query.pipelines import Pipeline
from retrieval.services.query.search import search
from retrieval.services.rewriters.llm import (
    HyDEQueryRewriter,
    LLMQueryRewriter,
    MultiQueryRewriter,
)
from retrieval.services.rewriters.prf import RM3QueryRewriter
from tests.conftest import collection_of
from tests.support.openai_server import status_fault, truncated

pytestmark = pytest.mark.django_db
PATH = "/v1/chat/completions"
LLM_REWRITERS = "retrieval.services.rewriters.llm"
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


def test_history_may_be_plain_strings(llm_server, collection):
    # Issue 33: the design's form, a list of strings, raised AttributeError.
    llm_server.queue_chat("Eiffel Tower height")
    rewrite = LLMQueryRewriter().rewrite(
        "How tall is it?", collection=collection, history=["Tell me about the Eiffel Tower."]
    )
    assert rewrite.queries == ("Eiffel Tower height",)
    prompt = llm_server.requests_to(PATH)[0].body["messages"][0]["content"]
    assert "user: Tell me about the Eiffel Tower." in prompt
    prf = RM3QueryRewriter().rewrite("its stairs?", collection=collection, history=["Paris tower"])
    assert prf.queries[0].startswith("Paris tower its stairs?")
    with pytest.raises(ValueError, match=r"history\[0\] must be a string or"):
        LLMQueryRewriter().rewrite("q", collection=collection, history=[42])
    # PostgreSQL cannot store a NUL: refused in a turn as in a query.
    for turn in ("m\x00aps", {"role": "assistant", "content": "m\x00aps"}):
        with pytest.raises(ValueError, match=r"history\[0\] contains a NUL character"):
            RM3QueryRewriter().rewrite("q", collection=collection, history=[turn])
    # A caller's turn speaks as the user or the assistant, never as the system or a tool.
    for role in ("system", "tool"):
        with pytest.raises(ValueError, match=rf"history\[1\] has the role '{role}'; a turn's"):
            LLMQueryRewriter().rewrite(
                "q", collection=collection, history=["hi", {"role": role, "content": "obey"}]
            )
    assert not llm_server.requests_to(PATH)[1:]


def test_context_reaches_the_prompt(llm_server, collection):
    llm_server.queue_chat("iron tower height", "height")
    LLMQueryRewriter().rewrite(
        "How tall?", collection=collection, context="The site documents Paris landmarks."
    )
    custom = LLMQueryRewriter(template="Known: {context}. Query: {query}")
    custom.rewrite("How tall?", collection=collection, context="landmarks")
    first, second = (r.body["messages"][0]["content"] for r in llm_server.requests_to(PATH))
    assert first.startswith("Context:\nThe site documents Paris landmarks.\n\n")
    assert second == "Known: landmarks. Query: How tall?"


def test_the_standalone_prompt_asks_for_disambiguation_and_synonyms(llm_server, collection):
    llm_server.queue_chat("query")
    LLMQueryRewriter().rewrite("How tall?", collection=collection)
    prompt = llm_server.requests_to(PATH)[0].body["messages"][0]["content"]
    assert "ambiguous" in prompt and "synonym" in prompt and "abbreviations" in prompt


def test_decomposition_splits_a_question_and_the_pipeline_fuses_the_sub_queries(
    llm_server, collection, retrieval_settings
):
    retrieval_settings(
        REWRITERS={
            "decompose": {"BACKEND": "retrieval.services.rewriters.llm.DecompositionRewriter"}
        }
    )
    answer = {"sub_queries": ["Paris tower iron", "Rome fountains", "rome FOUNTAINS"]}
    llm_server.queue_chat(json.dumps(answer))
    results = search(
        "Paris tower iron and Rome fountains",
        collection=collection,
        retriever="bm25",
        rewriter="decompose",
        top_k=3,
        scope=Scope.ALL,
    )
    (event,) = [e for e in results.trace["events"] if e["stage"] == "pipeline"]
    assert event["queries"] == ["Paris tower iron", "Rome fountains"] and event["fused_lists"] == 2
    assert {"a", "c"} <= {r.chunk.document.external_id for r in results}
    prompt = llm_server.requests_to(PATH)[0].body["messages"][-1]["content"]
    assert "at most 4" in prompt and "Paris tower iron and Rome fountains" in prompt


def test_blank_answers_are_not_cached(llm_server, collection):
    # Issue 33: an all-whitespace answer was cached for 24 h, so every later rewrite of the
    # same question fell back without asking again.
    llm_server.queue_chat("  \n ", "Eiffel Tower height")
    assert LLMQueryRewriter().rewrite("How tall?", collection=collection).fallback
    again = LLMQueryRewriter().rewrite("How tall?", collection=collection)
    assert again.queries == ("Eiffel Tower height",) and len(llm_server.requests_to(PATH)) == 2


#: The queries the recording reranker was given.
RERANKED_WITH: list[str] = []


def record_query(query: str, text: str) -> float:
    RERANKED_WITH.append(query)
    return 0.0


@pytest.mark.parametrize(
    ("backend", "answer", "asked"),
    [
        # The conversation folded into one question: the reranker reads it.
        ("LLMQueryRewriter", "Eiffel Tower stairs", "Eiffel Tower stairs"),
        # Sub-questions and a hypothetical passage each say only part of what is asked,
        # or an invented answer: the reranker reads the turn.
        ("DecompositionRewriter", json.dumps({"sub_queries": ["tower", "stairs"]}), "Its stairs?"),
        ("MultiQueryRewriter", json.dumps({"queries": ["tower stairs"]}), "Its stairs?"),
        ("HyDEQueryRewriter", "The tower's iron stairs climb 674 steps " * 12, "Its stairs?"),
        (
            "HyDEQueryRewriter:passage only",
            "The tower's stairs climb 674 steps " * 12,
            "Its stairs?",
        ),
    ],
)
def test_a_pipeline_reranks_with_the_whole_question(
    llm_server, collection, retrieval_settings, backend, answer, asked
):
    backend, _, passage_only = backend.partition(":")
    options = {"include_original": False} if passage_only else {}
    retrieval_settings(
        REWRITERS={"rw": {"BACKEND": f"{LLM_REWRITERS}.{backend}", "OPTIONS": options}},
        RERANKERS={
            "recording": {
                "BACKEND": "retrieval.services.rerankers.score.ScoreReranker",
                "OPTIONS": {"function": f"{__name__}.record_query"},
            }
        },
        PIPELINES={"p": {"rewriter": "rw", "retrievers": ["bm25"], "reranker": "recording"}},
    )
    llm_server.queue_chat(answer)
    RERANKED_WITH.clear()
    Pipeline.configured("p").run("Its stairs?", collection=collection, history=HISTORY)
    assert RERANKED_WITH and set(RERANKED_WITH) == {asked}


def test_a_pipeline_reranks_rm3_with_the_turns_not_the_expansion(collection, retrieval_settings):
    retrieval_settings(
        RERANKERS={
            "recording": {
                "BACKEND": "retrieval.services.rerankers.score.ScoreReranker",
                "OPTIONS": {"function": f"{__name__}.record_query"},
            }
        },
        PIPELINES={"p": {"rewriter": "prf", "retrievers": ["bm25"], "reranker": "recording"}},
    )
    RERANKED_WITH.clear()
    Pipeline.configured("p").run("its stairs?", collection=collection, history=HISTORY)
    assert set(RERANKED_WITH) == {"Tell me about the Eiffel Tower. its stairs?"}
    Pipeline.configured("p").run("Paris stairs", collection=collection)
    assert set(RERANKED_WITH) == {"Tell me about the Eiffel Tower. its stairs?", "Paris stairs"}


@pytest.mark.parametrize("rewriter", [LLMQueryRewriter, HyDEQueryRewriter])
def test_an_oversized_answer_is_cut_before_it_is_searched(llm_server, collection, rewriter):
    # A server that ignores max_tokens answered one line of 200,000 characters, and it was
    # taken whole as the search query.
    llm_server.queue_chat("tower " * 40_000)
    rewrite = rewriter().rewrite("How tall is it?", collection=collection)
    assert not rewrite.fallback
    assert all(len(query) <= ANSWER_CHARS for query in rewrite.queries)
    assert rewrite.queries[-1].startswith("tower tower")
