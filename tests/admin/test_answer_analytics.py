"""Answer analytics on the admin's search analytics page: volume, abstentions, votes and
the questions most often abstained on, within the period, readers' answers by default."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

import retrieval
from retrieval.models import AnswerVote, QueryTrace
from retrieval.services.query.search_log import traced_as

pytestmark = pytest.mark.django_db

URL = "/admin/retrieval/querytrace/analytics/"
UNANSWERABLE = 1000  # a min_score nothing reaches: the answer abstains


@pytest.fixture
def answered(keyword_settings, retrieval_settings):
    """Four readers' answers (two abstaining on one question, asked in two spellings), an
    old one outside the last day, an editor's in the playground, and plain searches."""
    from tests.conftest import collection_of

    retrieval_settings(TRACE_SAMPLE_RATE=1)
    collection_of("atlas", {"moon": "The tides are caused by the gravity of the moon."})
    model = get_user_model()
    reader = model.objects.create_user("reader")

    def ask(question: str, **options):
        return retrieval.answer(
            question, collection="atlas", user=reader, extractive=True, **options
        )

    helped, unhelped = ask("What causes the tides?"), ask("Is the moon made of gravity?")
    ask("Why is the sky blue?", min_score=UNANSWERABLE)
    ask("why is  the SKY blue?", min_score=UNANSWERABLE)
    old = ask("Old tides question?", min_score=UNANSWERABLE)
    QueryTrace.objects.filter(pk=old.trace_id).update(created_at=timezone.now() - timedelta(days=3))
    with traced_as(QueryTrace.Source.PLAYGROUND):
        ask("Editors' test question?", min_score=UNANSWERABLE)
    retrieval.search("tides", collection="atlas", user=reader)
    for result, helpful in ((helped, True), (unhelped, False), (old, True)):
        AnswerVote.objects.create(trace_id=result.trace_id, user=reader, helpful=helpful)
    return model.objects.create_superuser("root", password="x")


def page(root, **params):
    client = Client()
    client.force_login(root)
    return client.get(URL, params)


def test_the_page_counts_answers_abstentions_and_votes_of_the_period(answered):
    response = page(answered, period="1d")
    answers = response.context["answers"]
    assert (answers.answers, answers.abstained) == (4, 2)
    assert (answers.helpful, answers.not_helpful) == (1, 1)
    assert answers.abstention_rate == 0.5
    assert [(r.query, r.searches) for r in answers.abstentions] == [("why is the sky blue?", 2)]
    body = response.content.decode()
    assert 'id="retrieval-answers"' in body and 'data-query="why is the sky blue?"' in body
    week = page(answered, period="7d").context["answers"]
    assert (week.answers, week.abstained, week.helpful) == (5, 3, 2)
    assert response.context["report"].searches == 5  # the answers' searches, and the search


def test_editors_answers_count_only_when_asked_for(answered):
    answers = page(answered, period="1d", editors="on").context["answers"]
    assert (answers.answers, answers.abstained) == (5, 3)
    assert "editors' test question?" in [r.query for r in answers.abstentions]


def test_the_answers_tables_download_as_csv(answered):
    summary = page(answered, period="1d", export="answers")
    assert summary["Content-Disposition"].endswith('-answers-1d.csv"')
    assert rows(summary) == [
        ["answers", "abstained", "abstention rate", "helpful votes", "not helpful votes"],
        ["4", "2", "0.5", "1", "1"],
    ]
    table = rows(page(answered, period="1d", export="abstained"))
    assert table[0] == ["question", "abstentions", "last seen"]
    assert [line[:2] for line in table[1:]] == [["why is the sky blue?", "2"]]


def rows(response) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(response.content.decode())))
