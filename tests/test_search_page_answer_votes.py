"""The search page's streamed answer in a real headless Chromium: its asker votes on it in
place, and an abstention lists the closest documents as the server-rendered box does."""

from __future__ import annotations

import pytest

from retrieval.models import AnswerVote, QueryTrace
from tests.support.a11y import axe_violations
from tests.test_search_page import SCREENS, atlas, fits, search, sign_in  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def reader_page(atlas, chromium, live_server, django_user_model):  # noqa: F811
    django_user_model.objects.create_user(username="reader", password="x")
    context = chromium.new_context(viewport=SCREENS["phone"])
    page = context.new_page()
    sign_in(page, live_server, "reader")
    yield page
    context.close()


def stream_answer(page, question: str) -> None:
    search(page, question)
    page.get_by_role("link", name="Answer this question from the documents").click()
    page.locator(".retrieval-answer-note").wait_for()


def test_the_asker_votes_on_the_streamed_answer_in_place(reader_page, llm_server):
    """The streamed answer had no vote at all."""
    page = reader_page
    llm_server.queue_chat("Emperor penguins huddle through the winter [1].")
    stream_answer(page, "penguins antarctica")
    results_url = page.url
    vote = page.locator("form.retrieval-answer-vote")
    vote.get_by_role("button", name="Not helpful").click()
    page.wait_for_selector("text=Thanks, your vote is recorded.")
    assert page.url == results_url  # voted in place
    assert vote.get_by_role("button", name="Not helpful").get_attribute("aria-pressed") == "true"
    stored = AnswerVote.objects.get()
    assert stored.helpful is False and stored.user.username == "reader"
    assert stored.trace.source == QueryTrace.Source.ANSWER
    vote.get_by_role("button", name="Helpful", exact=True).click()
    page.wait_for_function(
        "document.querySelector('form.retrieval-answer-vote button[value=true]')"
        ".getAttribute('aria-pressed') === 'true'"
    )
    assert AnswerVote.objects.get().helpful is True  # the second vote changed the first
    assert fits(page)
    assert axe_violations(page) == []


def test_a_streamed_abstention_lists_the_closest_documents(reader_page, llm_server):
    """The streamed box listed none (the server-rendered one did)."""
    page = reader_page
    llm_server.queue_chat("NOT IN PASSAGES")
    stream_answer(page, "penguins antarctica")
    assert "do not answer this question" in page.locator(".retrieval-answer-text").inner_text()
    closest = page.locator(".retrieval-answer-closest li a")
    assert closest.count() >= 1
    assert "Field guide" in closest.all_inner_texts()
    assert closest.first.get_attribute("href").startswith("/documents/")
    assert page.get_by_text("The closest documents:").is_visible()
