"""The extractive answer's sentence choice, worked out by hand."""

from __future__ import annotations

from retrieval.services.answers.extractive import extract, rank_sentences, split_sentences
from retrieval.services.answers.grounding import check_citations, cited_sentences


def test_sentences_are_split_at_packings_boundaries_and_headings():
    assert split_sentences("Setup\nRun it. Then stop!  Done") == [
        "Setup",
        "Run it.",
        "Then stop!",
        "Done",
    ]


def test_a_question_heading_gives_its_score_to_the_sentence_answering_it():
    passages = {
        1: "Which databases are supported?\nOnly PostgreSQL with pgvector. Nothing else.",
        2: "Databases are hard. Support is slow.",
    }
    ranked = rank_sentences("Which databases are supported?", passages)
    best = ranked[0][1]
    assert (best.number, best.text) == (1, "Only PostgreSQL with pgvector.")
    assert all(not s.text.endswith("?") for _, s in ranked)  # a question is no answer


def test_the_best_sentences_come_in_passage_order_and_nothing_matches_nothing():
    passages = {1: "Cats purr. Dogs bark loudly.", 2: "Dogs fetch sticks."}
    picked = extract("dogs", passages, sentences=2)
    assert [(s.number, s.text) for s in picked] == [
        (1, "Dogs bark loudly."),
        (2, "Dogs fetch sticks."),
    ]
    assert extract("zebra", passages, sentences=2) == []


def test_citations_naming_no_passage_are_removed_and_markers_after_the_stop_kept():
    checked = check_citations("Up is north [1, 4]. Down [5]. Left. [2]", {1, 2})
    assert checked.text == "Up is north [1]. Down. Left. [2]"
    assert (checked.cited, checked.fabricated) == ((1, 2), (4, 5))
    assert checked.uncited == ("Down.",)
    assert cited_sentences("A [1]. B. [2]") == [("A [1].", (1,)), ("B. [2]", (2,))]


def test_a_sentence_far_below_the_best_and_a_few_words_are_left_out():
    passages = {
        1: "How do I add it?\n# ...\nInstall the package and add the app:",
        2: "Add water to taste. Salt is optional.",
    }
    picked = extract("How do I add it?", passages, sentences=3)
    assert [s.text for s in picked] == ["Install the package and add the app:"]
