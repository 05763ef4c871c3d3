"""APIReranker against a real HTTP server speaking the rerank protocols (Cohere's and TEI's)."""

from __future__ import annotations

import pytest

from retrieval.services.core.tracing import Budget, traced
from retrieval.services.rerankers.api import APIReranker
from retrieval.testing.rerankers import RerankerSuite
from tests.services.rerankers.test_rerankers import results  # noqa: F401  (the fixture)
from tests.support.openai_server import OpenAIServer, status_fault

pytestmark = pytest.mark.django_db


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running


def ids(reranked) -> list[str]:
    return [r.chunk.document.external_id for r in reranked]


def test_the_service_orders_the_candidates_and_scores_them(server, results):  # noqa: F811
    reranker = APIReranker(base_url=server.base_url, model="bge-reranker")
    reranked = reranker.rerank("penguins ice", results)
    # Word overlap: "a" (penguins, ice) 1.0; "c" (penguins) and "d" (ice) 0.5; others 0.
    assert ids(reranked)[:3] in (["a", "c", "d"], ["a", "d", "c"])
    assert reranked[0].score == 1.0 and all(0.0 <= r.score <= 1.0 for r in reranked)
    (request,) = server.requests_to("/v1/rerank")
    assert request.body["model"] == "bge-reranker" and request.body["query"] == "penguins ice"
    assert len(request.body["documents"]) == 5 and request.body["top_n"] == 5


def test_tei_speaks_texts_and_answers_a_list(server, results):  # noqa: F811
    reranker = APIReranker(base_url=server.root_url, protocol="tei")
    assert ids(reranker.rerank("penguins ice", results))[0] == "a"
    assert "texts" in server.requests_to("/rerank")[0].body


def test_top_n_scores_the_best_and_keeps_the_rest_in_order_below(server, results):  # noqa: F811
    reranked = APIReranker(base_url=server.base_url, top_n=1).rerank("volcanoes", results)
    assert ids(reranked)[0] == "b"
    rest = [r for r in results if r.chunk.document.external_id != "b"]
    assert ids(reranked)[1:] == [r.chunk.document.external_id for r in rest]


def test_errors_are_retried_then_the_order_is_kept_with_the_reason(server, results):  # noqa: F811
    server.fail_next(status_fault(503))
    assert ids(APIReranker(base_url=server.base_url).rerank("volcanoes", results))[0] == "b"
    server.fail_next(*[status_fault(500)] * 3)
    with traced() as trace:
        kept = APIReranker(base_url=server.base_url, max_retries=2).rerank("volcanoes", results)
    assert ids(kept) == ids(results)
    (event,) = [e for e in trace.events if e["stage"] == "rerank"]
    assert "did not answer after 3 attempts" in event["error"]
    bad = APIReranker(base_url="http://127.0.0.1:9", max_retries=0).rerank("q", results)
    assert ids(bad) == ids(results)  # refused: nothing listens there


def test_no_call_once_the_searchs_deadline_has_passed(
    server,
    results,  # noqa: F811
    retrieval_settings,
):
    retrieval_settings(SEARCH_DEADLINE=1e-9)
    with traced() as trace:
        kept = APIReranker(base_url=server.base_url).rerank("volcanoes", results)
    assert ids(kept) == ids(results) and not server.requests_to("/v1/rerank")
    assert "no time left: the search's SEARCH_DEADLINE" in trace.events[0]["error"]


def test_the_llm_budget_leaves_the_service_alone(server, results):  # noqa: F811
    # Not an LLM: LLM_BUDGET's seconds are the LLM calls' share, not the reranker's.
    with traced(budget=Budget(max_seconds=1e-9)):
        reranked = APIReranker(base_url=server.base_url).rerank("volcanoes", results)
    assert ids(reranked)[0] == "b" and server.requests_to("/v1/rerank")


@pytest.mark.parametrize(
    "options",
    [
        {"base_url": "ftp://x"},
        {"base_url": "http://x", "protocol": "grpc"},
        {"base_url": "http://x", "top_n": 0},
        {"base_url": "http://x", "timeout": 0},
    ],
)
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError):
        APIReranker(**options)


class TestAPIReranker(RerankerSuite):
    def make_reranker(self, request):
        return APIReranker(base_url=request.getfixturevalue("server").base_url)
