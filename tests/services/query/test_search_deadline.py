"""One deadline per search (``SEARCH_DEADLINE``) over every remote call it makes: the query's
embedding, a rerank service and an LLM, each answered by a real HTTP server on 127.0.0.1
that hangs. Each test bounds a search that would otherwise wait 20 s or more by the
deadline plus a margin; the frozen engine's case is in tests/services/indexes/test_outbox.py.
"""

from __future__ import annotations

import time

import pytest

from retrieval.exceptions import EmbeddingUnavailableError
from retrieval.services.access import Scope
from retrieval.services.core.tracing import traced
from retrieval.services.query.search import search
from tests.conftest import collection_of
from tests.support.openai_server import OpenAIServer, hang_fault

pytestmark = pytest.mark.django_db(transaction=True)

#: The searches' deadline, small to keep the tests short.
DEADLINE = 1.5
#: What a search may take past its deadline (PostgreSQL's work, a busy machine); the
#: services' own timeouts below would hold it 5-20 s longer.
MARGIN = 2.5
#: What a call cut at the deadline says.
PASSED = "no time left: the search's SEARCH_DEADLINE (1.5 s) has passed"
ALL = Scope.ALL
TEXTS = {"n": "north", "ne": "north east", "e": "east", "u": "up"}
EMBEDDERS = {
    "http": ("HTTPEmbedder", "/embed"),
    "openai": ("OpenAIEmbedder", "/v1/embeddings"),
}


@pytest.fixture
def server(retrieval_settings):
    with OpenAIServer(dimension=16, models=("test-chat",)) as running:
        yield running


def embedder_config(kind: str, server: OpenAIServer) -> dict:
    """A service embedder whose own timeout and retries would wait 20 s for a hung server."""
    backend = EMBEDDERS[kind][0]
    options = {"timeout": 5, "max_retries": 3}
    if kind == "http":
        options["base_url"] = server.root_url
    else:
        options |= {"base_url": server.base_url, "model": "test-embedding", "dimensions": 16}
    return {"BACKEND": f"retrieval.services.embedders.{kind}.{backend}", "OPTIONS": options}


def within(seconds: float, function, *args, **kwargs):
    """Return ``function``'s result, or the exception it raised, checking that it came back
    within ``seconds`` (a deadline plus a margin: a bound, not a speed)."""
    started = time.monotonic()
    try:
        outcome = function(*args, **kwargs)
    except Exception as e:  # the caller checks which
        outcome = e
    assert time.monotonic() - started < seconds, outcome
    return outcome


def search_within(collection, **options):
    """Search "north" in ``collection``: its results, or the exception it raised, checking
    that it came back by the deadline plus the margin."""
    return within(DEADLINE + MARGIN, search, "north", collection=collection, scope=ALL, **options)


def unavailable(failure: Exception, error: type[Exception], reason: str) -> bool:
    """Whether ``failure`` is ``error`` saying ``reason``."""
    return isinstance(failure, error) and reason in str(failure)


@pytest.mark.parametrize("kind", list(EMBEDDERS))
def test_a_hanging_embedding_service_ends_the_search_at_its_deadline(
    kind, server, retrieval_settings
):
    retrieval_settings(EMBEDDERS={"default": embedder_config(kind, server)})
    collection = collection_of("compass", TEXTS)
    retrieval_settings(SEARCH_DEADLINE=DEADLINE)
    server.fail_next(*[hang_fault()] * 20, path=EMBEDDERS[kind][1])

    # A dense search alone fails as the service being unavailable (the API's 503) ...
    failure = search_within(collection, retriever="dense")
    assert unavailable(failure, EmbeddingUnavailableError, PASSED), failure

    # ... and a hybrid one answers from BM25, naming the leg cut at the deadline.
    found = search_within(collection, retriever="hybrid")
    assert {r.chunk.document.external_id for r in found} == {"n", "ne"}
    assert "SEARCH_DEADLINE" in found[0].metadata["failed_legs"]["dense"]


def test_a_hanging_rerank_service_keeps_the_order_at_the_searchs_deadline(
    server, keyword_settings, retrieval_settings
):
    collection = collection_of("compass", TEXTS)
    retrieval_settings(
        SEARCH_DEADLINE=DEADLINE,
        RERANKERS={
            "api": {
                "BACKEND": "retrieval.services.rerankers.api.APIReranker",
                "OPTIONS": {"base_url": server.base_url, "timeout": 10, "max_retries": 2},
            }
        },
    )
    server.fail_next(*[hang_fault()] * 5, path="/v1/rerank")
    plain = search("north", collection=collection, retriever="bm25", scope=Scope.ALL)
    found = search_within(collection, retriever="bm25", reranker="api")
    assert [r.chunk.pk for r in found] == [r.chunk.pk for r in plain]
    (rerank,) = [e for e in found.trace["events"] if e["stage"] == "rerank"]
    assert PASSED in rerank["error"]


def test_the_llms_share_ends_at_the_searchs_deadline(server, keyword_settings, retrieval_settings):
    collection = collection_of("compass", TEXTS)
    retrieval_settings(
        SEARCH_DEADLINE=DEADLINE,
        LLM_BUDGET={"max_seconds": None},  # the deadline alone bounds the LLM calls
        LLMS={
            "default": {
                "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
                "OPTIONS": {"model": "test-chat", "base_url": server.base_url, "timeout": 20},
            }
        },
        REWRITERS={"llm": {"BACKEND": "retrieval.services.rewriters.llm.LLMQueryRewriter"}},
    )
    server.fail_next(*[hang_fault()] * 5, path="/v1/chat/completions")
    found = search_within(collection, retriever="bm25", rewriter="llm")
    assert {r.chunk.document.external_id for r in found} == {"n", "ne"}  # the original query
    (call,) = found.trace["llm_calls"]
    assert "timed out" in call["error"]


def test_a_nested_trace_keeps_the_outer_searchs_deadline(retrieval_settings):
    from retrieval.services.core.tracing import current_deadline

    retrieval_settings(SEARCH_DEADLINE=DEADLINE)
    with traced():
        outer = current_deadline()
        retrieval_settings(SEARCH_DEADLINE=60)
        with traced():
            assert current_deadline() is outer
    assert current_deadline() is None
    assert outer is not None and outer.what == "the search's SEARCH_DEADLINE (1.5 s)"


@pytest.mark.parametrize("value", [0, -1, "10", True])
def test_a_bad_deadline_is_refused_naming_the_setting(retrieval_settings, value):
    retrieval_settings(SEARCH_DEADLINE=value)
    with pytest.raises(ValueError, match="SEARCH_DEADLINE"):
        with traced():
            pass
