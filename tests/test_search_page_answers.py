"""The search page's answer box: traced as the page's, voted on by its asker."""

from __future__ import annotations

import pytest

from retrieval.models import AnswerVote, QueryTrace
from tests.test_search_page_traces import reader_client as reader  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

QUESTION = "Where do penguins live?"


def answer_event(row: QueryTrace) -> dict:
    return next(e for e in row.trace["events"] if e["stage"] == "answer")


def test_the_server_rendered_answer_is_traced_as_the_pages(reader):  # noqa: F811
    """It was traced with the face ``python``: it ran outside the page's ``traced_as``."""
    response = reader.get("/", {"q": QUESTION, "collection": "atlas", "answer": "1"})
    assert response.status_code == 200 and response.context["answer"] is not None
    row = QueryTrace.objects.get(query=QUESTION, source=QueryTrace.Source.ANSWER)
    assert answer_event(row)["face"] == QueryTrace.Source.PAGE


def test_an_answer_another_sites_page_asks_for_is_not_traced(reader):  # noqa: F811
    response = reader.get(
        "/",
        {"q": QUESTION, "collection": "atlas", "answer": "1"},
        HTTP_SEC_FETCH_SITE="cross-site",
    )
    assert response.context["answer"] is not None  # answered, as the search is
    assert not QueryTrace.objects.exists()


def test_the_asker_votes_on_the_server_rendered_answer_with_its_form(reader):  # noqa: F811
    """The answer box had no vote; its form posts to the feedback API without JavaScript."""
    response = reader.get("/", {"q": QUESTION, "collection": "atlas", "answer": "1"})
    box = response.context["answer"]
    assert box.trace_id == QueryTrace.objects.get(source=QueryTrace.Source.ANSWER).pk
    body = response.content.decode()
    assert 'class="retrieval-answer-vote"' in body
    assert f'name="trace_id" value="{box.trace_id}"' in body
    vote = response.context["answer_vote"]
    assert f'data-vote-url="{vote["url"]}"' in body  # for the streamed answer's form
    posted = reader.post(vote["url"], {"trace_id": box.trace_id, "helpful": "true"})
    assert posted.status_code == 202
    assert AnswerVote.objects.get().helpful is True


def test_no_vote_is_offered_to_a_visitor_not_signed_in(reader, retrieval_settings, client):  # noqa: F811
    retrieval_settings(SEARCH_PAGE_PUBLIC=True)
    client.logout()
    response = client.get("/", {"q": QUESTION, "collection": "atlas", "answer": "1"})
    assert response.context["answer"] is not None and response.context["answer_vote"] is None
    assert b"retrieval-answer-vote" not in response.content
