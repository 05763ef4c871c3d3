"""Every LLM stage fed arbitrary schema-valid answers over real HTTP (hypothesis): ids as
integer-valued floats, out of range or repeated, NUL characters and lone surrogates in
strings. No answer may raise, and each stage's output keeps its invariants; through the
API no answer may produce a 5xx."""

from __future__ import annotations

import json
import math

import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from retrieval.services.agentic.stages import LLMEvaluator, LLMSelector
from retrieval.services.extractors.llm import LLMTripleExtractor
from retrieval.services.registry import retrievers
from retrieval.services.rerankers.llm import LLMReranker, ranking_schema
from retrieval.services.rewriters.llm import (
    DecompositionRewriter,
    HyDEQueryRewriter,
    LLMQueryRewriter,
    MultiQueryRewriter,
    queries_schema,
)
from tests.conftest import collection_of
from tests.services.llms.schemas import ANY_CHAR, answers, schema_of
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TEXTS = {
    "penguins": "Penguins live on ice.",
    "camels": "Camels cross deserts.",
    "owls": "Owls hunt at night.",
    "krill": "Penguins eat krill.",
}


@pytest.fixture
def server(keyword_settings, retrieval_settings):
    """A scripted server as the uncached ``default`` LLM, and the collection ``zoo``."""
    with OpenAIServer(models=("fuzz",)) as server:
        retrieval_settings(
            LLMS={
                "default": {
                    "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                    "OPTIONS": {"model": "fuzz", "base_url": server.base_url, "cache": None},
                }
            },
            REWRITERS={
                "standalone": {"BACKEND": "retrieval.services.rewriters.llm.LLMQueryRewriter"}
            },
            RERANKERS={"llm": {"BACKEND": "retrieval.services.rerankers.llm.LLMReranker"}},
        )
        server.collection = collection_of("zoo", TEXTS)
        yield server


def clean(text: str) -> bool:
    return "\x00" not in text and not any("\ud800" <= c <= "\udfff" for c in text)


def candidates(server):
    return retrievers["bm25"].retrieve("penguins camels owls krill", collection=server.collection)


def json_answer(value) -> str:
    return json.dumps(value, ensure_ascii=False)


@FUZZ
@given(data=st.data())
def test_the_reranker_returns_a_permutation(server, data):
    results = candidates(server)
    server.queue_chat(json_answer(data.draw(answers(ranking_schema(len(results))))))
    reranked = LLMReranker().rerank("penguins", results)
    assert sorted(r.chunk_id for r in reranked) == sorted(r.chunk_id for r in results)
    assert all(0 <= r.score <= 1 for r in reranked)


@FUZZ
@given(data=st.data(), limit=st.integers(1, 4))
def test_the_selector_picks_distinct_candidates_within_the_limit(server, data, limit):
    found = candidates(server)
    server.queue_chat(json_answer(data.draw(answers(LLMSelector.schema(limit)))))
    selection = LLMSelector().select("penguins", found, limit=limit)
    ids = [r.chunk_id for r in selection.results]
    assert len(ids) == len(set(ids)) <= limit and set(ids) <= {r.chunk_id for r in found}
    assert clean(selection.reason)


@FUZZ
@given(data=st.data())
def test_the_judge_scores_in_the_unit_interval(server, data):
    server.queue_chat(json_answer(data.draw(answers(LLMEvaluator.SCHEMA))))
    verdict = LLMEvaluator().evaluate("penguins", candidates(server))
    assert math.isfinite(verdict.score) and 0 <= verdict.score <= 1 and clean(verdict.reason)


@FUZZ
@given(
    data=st.data(),
    rewriter=st.sampled_from(
        [LLMQueryRewriter, HyDEQueryRewriter, MultiQueryRewriter, DecompositionRewriter]
    ),
)
def test_rewriters_return_searchable_queries(server, data, rewriter):
    if rewriter is MultiQueryRewriter:
        answer = json_answer(data.draw(answers(queries_schema("queries", 3))))
    elif rewriter is DecompositionRewriter:
        answer = json_answer(data.draw(answers(queries_schema("sub_queries", 4))))
    else:
        answer = data.draw(st.text(ANY_CHAR, max_size=300))
    server.queue_chat(answer)
    rewrite = rewriter().rewrite("penguins", collection=server.collection, history=["ice?"])
    assert rewrite.queries and all(q.strip() and clean(q) for q in rewrite.queries)
    retrievers["bm25"].retrieve(rewrite.queries[-1], collection=server.collection)


@FUZZ
@given(data=st.data())
def test_the_extractor_returns_clean_triples(server, data):
    extractor = LLMTripleExtractor()
    server.queue_chat(json_answer(data.draw(answers(extractor.schema))))
    (triples,) = extractor.extract(["Penguins eat krill."])
    for triple in triples:
        parts = (triple.subject, triple.predicate, triple.object)
        assert all(part.strip() and clean(part) for part in parts)
        assert 0 <= triple.confidence <= 1


@settings(FUZZ, max_examples=25)
@given(
    ranking=answers(ranking_schema(20)),
    selected=answers(LLMSelector.schema(5)),
    verdict=answers(LLMEvaluator.SCHEMA),
    text=st.text(ANY_CHAR, max_size=200),
)
def test_no_answer_makes_the_search_api_fail(server, ranking, selected, verdict, text):
    """Agentic search with an LLM rewrite and rerank: each call answered by its schema."""
    user = get_user_model().objects.get_or_create(username="fuzzer")[0]
    api = APIClient()
    api.force_authenticate(user)
    drawn = {"ranking": ranking, "selected": selected, "score": verdict}

    def answer(request):
        schema = schema_of(request)
        if schema is None:  # a rewrite: text
            return text
        (key,) = [key for key in drawn if key in schema["properties"]]
        value = dict(drawn[key])
        if isinstance(value[key], list):  # as many ids as this request's schema allows
            value[key] = value[key][: schema["properties"][key]["maxItems"]]
        return json_answer(value)

    server.queue_chat(*[answer] * 12)
    body = {"query": "penguins food", "collection": "zoo", "retriever": "agentic", "top_k": 3}
    for extra in ({"rerank": "llm"}, {"rewrite": "standalone"}):
        response = api.post("/api/search/", {**body, **extra}, format="json")
        assert response.status_code == 200, response.content
        json.loads(response.content)
    server.reset()
