"""The answers on the ``retrieval`` facade: ``answer``, ``aanswer`` and ``answer_stream``."""

from __future__ import annotations

import pytest

import retrieval
from retrieval.exceptions import CollectionNotFound
from retrieval.services.answers.records import Answer
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def library(keyword_settings):
    return collection_of("Library", {"tides": "The tides are caused by the gravity of the moon."})


def test_answer_stream_is_on_the_facade_and_streams_the_answer(library):
    assert "answer_stream" in retrieval.__all__
    events = list(
        retrieval.answer_stream(
            "What causes the tides?",
            collection="Library",
            scope=retrieval.Scope.ALL,
            extractive=True,
        )
    )
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "answer" and set(kinds[:-1]) == {"token"}
    final = events[-1][1]
    assert isinstance(final, Answer) and final.mode == "extractive"
    assert "".join(data["text"] for kind, data in events[:-1]) == final.text
    assert "gravity of the moon" in final.text


def test_answer_stream_checks_its_arguments_before_the_first_event(library):
    with pytest.raises(CollectionNotFound):
        retrieval.answer_stream("tides?", collection="Nowhere", scope=retrieval.Scope.ALL)
