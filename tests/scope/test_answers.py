"""Grounded answers never come from what the asker may not see (issue 63).

Document D (team b, in Atlas) holds the only answer to the question: its secret
phrase. Alice (team a) may read Atlas but not D; Bob (team b) may read D. On every
face of answers (Python, async, the agent tool, the API as JSON and as a stream, the
trace each stores, and the prompt an LLM is sent) Alice never gets D's text, title or
id, while Bob gets the phrase, which shows each face could leak it.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

import retrieval
from retrieval.models import Document, QueryTrace
from retrieval.services.answers.service import _within_scope
from retrieval.services.core.tracing import traced
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.tools import answer_tool
from tests.conftest import run_async

pytestmark = pytest.mark.django_db(transaction=True)  # aanswer runs on a worker thread

SECRET = "zebra-4417"
QUESTION = "What is the vault code?"
TITLE = "Vault handbook"


@pytest.fixture
def vault(world, retrieval_settings):
    retrieval_settings(TRACE_SAMPLE_RATE=1)
    atlas = retrieval.Scope.ALL.collection("Atlas")
    ingest(
        atlas,
        [
            Source.from_text(
                f"The vault code is {SECRET}. Change the vault code monthly.",
                external_id="doc-vault",
                title=TITLE,
                metadata={"team": "b", "url": "https://example.org/vault"},
            )
        ],
    )
    return Document.objects.get(external_id="doc-vault")


def faces(user) -> str:
    """Everything the answer faces give ``user`` for the question, as one text."""
    client = APIClient()
    client.force_authenticate(user)
    body = {"question": QUESTION, "collection": "Atlas"}
    plain = client.post("/api/answer/", body, format="json")
    streamed = client.post("/api/answer/", {**body, "stream": True}, format="json")
    assert plain.status_code == streamed.status_code == 200
    texts = [plain.content.decode(), b"".join(streamed.streaming_content).decode()]
    direct = retrieval.answer(QUESTION, collection="Atlas", user=user)
    later = run_async(retrieval.aanswer(QUESTION, collection="Atlas", user=user))
    for result in (direct, later):
        texts.append(json.dumps([result.to_dict(), result.trace]))
        texts.append(json.dumps([r.to_dict() for r in result.results]))
    texts.append(answer_tool(collection="Atlas", user=user).execute({"question": QUESTION}))
    traces = QueryTrace.objects.filter(source=QueryTrace.Source.ANSWER, user=user)
    assert traces.count() == 5  # the API twice, Python, async, the tool
    texts.append(json.dumps(list(traces.values("results", "trace"))))
    return " ".join(texts)


def leaks(text: str, document: Document) -> list[str]:
    return [
        what
        for what in (SECRET, TITLE, document.external_id, f'"document_id": {document.pk}')
        if what in text
    ]


def test_an_answer_never_comes_from_a_document_the_asker_may_not_see(world, vault):
    assert leaks(faces(world["alice"]), vault) == []
    assert leaks(faces(world["bob"]), vault) == [
        SECRET,
        TITLE,
        "doc-vault",
        f'"document_id": {vault.pk}',
    ]


def test_the_llm_is_never_sent_a_hidden_passage(world, vault, llm_server):
    llm_server.queue_chat("The code is given in [1].", "The code is given in [1].")
    told = retrieval.answer(QUESTION, collection="Atlas", user=world["alice"])
    assert leaks(json.dumps([told.to_dict(), told.trace]), vault) == []
    retrieval.answer(QUESTION, collection="Atlas", user=world["bob"])
    sent = llm_server.requests_to("/v1/chat/completions")
    alice, bob = (request.body["messages"][1]["content"] for request in sent)
    assert SECRET not in alice and TITLE not in alice
    assert SECRET in bob  # the same question, asked by who may read D


def test_citations_are_checked_against_the_scope_before_they_are_returned(world, vault):
    # What Bob was answered, were it returned to Alice (a scope narrowed mid-answer):
    # the re-check drops every citation of D, and the answer abstains.
    answered = retrieval.answer(QUESTION, collection="Atlas", user=world["bob"])
    assert [c.external_id for c in answered.citations] == ["doc-vault"]
    with traced() as trace:
        narrowed = _within_scope(answered, retrieval.Scope.for_user(world["alice"]), trace)
    assert narrowed.abstained and not narrowed.citations
    assert leaks(json.dumps(narrowed.to_dict()), vault) == []
    assert trace.events == [{"stage": "answer_hidden_citations", "count": 1}]
