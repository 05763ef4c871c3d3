"""The extractive answer abstains rather than invents (issue 63), on the sample documents:
a sentence sharing only a generic word with the question is left out, and a question the
documents do not answer gets an abstention while one they answer still gets its answer."""

from __future__ import annotations

import pytest

from retrieval.conf import DEFAULTS
from retrieval.services.access import Scope
from retrieval.services.answers.extractive import coverage, extract
from retrieval.services.answers.service import answer

pytestmark = pytest.mark.django_db

#: What ``dev.py demo`` indexes and asks about databases: the FAQ answers it, the release
#: notes too, and the settings example describes "customer support tickets".
FILES = ("faq.md", "release-notes.md", "default-settings.json")
DATABASES = "Which databases are supported?"


@pytest.fixture
def handbook(sample_handbook):
    return sample_handbook(*FILES)


def ask(question: str):
    return answer(question, collection="handbook", scope=Scope.ALL, extractive=True)


def test_a_sentence_sharing_only_a_generic_word_is_left_out(handbook):
    result = ask(DATABASES)
    assert not result.abstained
    assert "PostgreSQL with the pgvector extension" in result.text
    assert "support tickets" not in result.text
    assert "default-settings.json" not in {c.external_id for c in result.citations}


def test_an_unanswered_question_abstains_and_an_answered_one_does_not(handbook):
    unanswered = ask("How do I deploy the site on Kubernetes with a Helm chart?")
    assert unanswered.abstained and unanswered.mode == "extractive"
    assert "min_coverage" in unanswered.reason and unanswered.citations == ()
    assert unanswered.closest  # the documents it looked at are still listed
    answered = ask(DATABASES)
    assert not answered.abstained and answered.citations


def test_the_floor_is_on_by_default_and_none_turns_it_off(handbook, retrieval_settings):
    assert DEFAULTS["ANSWERS"]["min_coverage"] is not None
    retrieval_settings(ANSWERS={"min_coverage": None})
    assert not ask("How do I deploy the site on Kubernetes with a Helm chart?").abstained


def test_coverage_weighs_a_word_no_passage_has_most():
    passages = {1: "Install the package with pip. Add the app to INSTALLED_APPS."}
    assert coverage("How do I install the package?", passages, sentences=3) == 1.0
    # "kubernetes" is in no passage: it weighs more than "install" and "package" together.
    assert 0 < coverage("How do I install the package on Kubernetes?", passages, sentences=3) < 0.5
    assert coverage("zebra", passages, sentences=3) == 0.0


def test_a_sentence_sharing_one_word_is_left_out_when_another_shares_two():
    passages = {
        1: "Databases hold rows. Support tickets are answered daily.",
        2: "We support databases.",
    }
    picked = extract("Which databases are supported?", passages, sentences=3)
    assert [s.text for s in picked] == ["We support databases."]
