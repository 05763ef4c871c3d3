"""``retrieval_search`` reaching an LLM: --rewriter with --history, --reranker, --pipeline."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import collection_of

pytestmark = pytest.mark.django_db
PATH = "/v1/chat/completions"


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def zoo(llm_server, keyword_settings, retrieval_settings):
    retrieval_settings(
        REWRITERS={"standalone": {"BACKEND": "retrieval.services.rewriters.llm.LLMQueryRewriter"}},
        RERANKERS={"llm": {"BACKEND": "retrieval.services.rerankers.llm.LLMReranker"}},
    )
    return collection_of(
        "zoo", {"penguins": "Penguins live on ice.", "camels": "Camels cross deserts."}
    )


def test_rewriter_and_history_reach_the_llm(zoo, llm_server):
    llm_server.queue_chat("camels cross deserts")
    history = json.dumps([{"role": "user", "content": "Tell me about camels."}])
    output = json.loads(
        run(
            "retrieval_search",
            "where do they live?",
            "--collection",
            "zoo",
            "--rewriter",
            "standalone",
            "--history",
            history,
            "--top-k",
            "1",
            "--json",
        )  # fmt: skip
    )
    (request,) = llm_server.requests_to(PATH)
    assert "Tell me about camels." in request.body["messages"][-1]["content"]
    assert [r["document"] for r in output["results"]] == ["camels"]
    assert [c["purpose"] for c in output["trace"]["llm_calls"]] == ["rewrite"]


def test_reranker_and_pipeline_options(zoo, llm_server):
    llm_server.queue_chat(lambda request: json.dumps({"ranking": [1, 0]}))
    output = json.loads(
        run(
            "retrieval_search",
            "penguins camels",
            "--collection",
            "zoo",
            "--reranker",
            "llm",
            "--json",
        )  # fmt: skip
    )
    assert [c["purpose"] for c in output["trace"]["llm_calls"]][:1] == ["rerank"]
    with pytest.raises(CommandError, match="psychic"):
        run("retrieval_search", "x", "--collection", "zoo", "--pipeline", "psychic")


def test_bad_history_is_a_command_error(zoo):
    with pytest.raises(CommandError, match="--history is not valid JSON"):
        run("retrieval_search", "x", "--collection", "zoo", "--history", "[{")
    with pytest.raises(CommandError, match="--history must be a JSON array"):
        run("retrieval_search", "x", "--collection", "zoo", "--history", '{"role": "user"}')
    with pytest.raises(CommandError, match=r"--history: history\[1\] must be a string or"):
        run("retrieval_search", "x", "--collection", "zoo", "--history", '["a", {"role": "bot"}]')
    system_turn = '[{"role": "system", "content": "Answer in French."}]'
    with pytest.raises(CommandError, match=r"--history: history\[0\] has the role 'system'"):
        run("retrieval_search", "x", "--collection", "zoo", "--history", system_turn)
    with pytest.raises(CommandError, match=r"--history: history\[1\] contains a NUL character"):
        run("retrieval_search", "x", "--collection", "zoo", "--history", '["a", "m\\u0000aps"]')


def test_history_may_hold_plain_strings(zoo, llm_server):
    """As in Python and the API: a string is an earlier user message."""
    llm_server.queue_chat("camels cross deserts")
    run(
        "retrieval_search", "where do they live?", "--collection", "zoo",
        "--rewriter", "standalone", "--history", json.dumps(["Tell me about camels."]),
    )  # fmt: skip
    (request,) = llm_server.requests_to(PATH)
    assert "user: Tell me about camels." in request.body["messages"][-1]["content"]
