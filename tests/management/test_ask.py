"""``retrieval_ask``: the answer printed with its citations, or as JSON; bad input refused."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from retrieval.models import QueryTrace
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

TEXTS = {
    "tides": "The tides are caused by the gravity of the moon. Sailors watch them closely.",
    "bread": "Bread rises because yeast makes carbon dioxide. Bakers knead the dough.",
}


@pytest.fixture
def library(keyword_settings, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    return collection_of("library", TEXTS)


def ask(*args: str) -> str:
    out = StringIO()
    call_command("retrieval_ask", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_ask_prints_the_answer_and_its_citations(library):
    printed = ask("What makes bread rise?", "--collection", "library")
    assert "Bread rises because yeast makes carbon dioxide. [1]" in printed
    assert printed.splitlines()[1].startswith("[1] ")  # the citation: title, external id
    assert printed.splitlines()[1].endswith("  bread")


def test_ask_json_with_an_llm(library, llm_server):
    llm_server.queue_chat("Yeast makes bread rise [1].")
    body = json.loads(ask("What makes bread rise?", "--collection", "library", "--json"))
    assert (body["mode"], body["text"]) == ("llm", "Yeast makes bread rise [1].")
    assert body["citations"][0]["document"] == "bread"
    trace = QueryTrace.objects.get(pk=body["trace_id"])
    assert [e["face"] for e in trace.trace["events"] if e["stage"] == "answer"] == ["command"]


def test_ask_says_when_it_abstains(library):
    printed = ask("zebra quantum", "--collection", "library")
    assert "Abstained:" in printed


@pytest.mark.parametrize(
    "args",
    [
        ["--collection", "nowhere"],
        ["--collection", "library", "--top-k", "0"],
        ["--collection", "library", "--filters", "{"],
        ["--collection", "library", "--llm", "nope"],
    ],
)
def test_ask_refuses_bad_options(library, args):
    with pytest.raises(CommandError):
        ask("What makes bread rise?", *args)
