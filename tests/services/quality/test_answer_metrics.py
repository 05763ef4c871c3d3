"""Grounded-answer metrics, worked out by hand on answers built here (no database)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from retrieval.services.quality.answer_metrics import (
    ANSWER_METRICS,
    AnswerCase,
    AnswerOutcome,
    AnswerQuestion,
    citation_precision,
    citation_recall,
    normalize_answer,
    outcome_of,
    run_answers,
    score_answer,
    score_answers,
    token_f1,
)


@dataclass(frozen=True)
class FakeCitation:
    external_id: str
    chunk_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class FakeAnswer:
    text: str
    abstained: bool = False
    citations: tuple[FakeCitation, ...] = ()
    results: list = field(default_factory=list)


def result(external_id: str, pk: int) -> SimpleNamespace:
    document = SimpleNamespace(external_id=external_id)
    return SimpleNamespace(chunk=SimpleNamespace(pk=pk, document=document))


QRELS = {"a": 2, "b": 1, "c": 0}


def test_citation_precision_and_recall():
    assert citation_precision({"a", "c"}, QRELS) == 0.5  # c is judged, but not relevant
    assert citation_precision({"a", "zzz"}, QRELS) == 0.5  # unjudged counts as not relevant
    assert citation_precision(set(), QRELS) is None
    assert citation_recall({"a"}, QRELS) == 0.5
    assert citation_recall({"a", "b", "c"}, QRELS) == 1.0
    assert citation_recall({"a"}, {"c": 0}) is None
    # Only b was retrieved: the answer could have cited b alone, and did not.
    assert citation_recall({"a"}, QRELS, within={"b", "c"}) == 0.0
    assert citation_recall({"b"}, QRELS, within={"b", "c"}) == 1.0
    assert citation_recall({"b"}, QRELS, within={"c"}) is None


@pytest.mark.parametrize(
    ("text", "normal"),
    [
        ("The Cat, a dog & AN eel!", "cat dog eel"),
        ("  Theory of\tanything. ", "theory of anything"),  # "the" only as a word
        ("MAX_CONTENT_LENGTH", "maxcontentlength"),
    ],
)
def test_normalize_answer_follows_squad(text, normal):
    assert normalize_answer(text) == normal


def test_token_f1():
    assert token_f1("The cat sat.", "a cat sat") == 1.0
    # 2 of 4 predicted, 2 of 3 expected: P 0.5, R 2/3, F1 4/7.
    assert token_f1("cat sat on mat", "cat sat down") == pytest.approx(4 / 7)
    assert token_f1("dog", "cat") == 0.0
    assert token_f1("cat cat", "cat") == pytest.approx(2 / 3)  # counts, not sets
    assert token_f1("the", "a") == 1.0  # both empty once normalised
    assert token_f1("", "cat") == 0.0
    # Citation markers are not words of the answer; other bracketed text is.
    assert token_f1("Up the hill [1]. Cats sat [2, 3][4].", "up hill cats sat") == 1.0
    assert token_f1("up [hill]", "up hill") == 1.0
    assert token_f1("up [1] 1", "up") == pytest.approx(2 / 3)


def test_outcome_reads_documents_or_chunks_and_what_was_retrieved():
    answer = FakeAnswer(
        "x",
        citations=(FakeCitation("a", (1, 2)), FakeCitation("b", (9,))),
        results=[result("a", 1), result("b", 9), result("c", 5)],
    )
    documents = outcome_of(answer)
    assert documents.cited == {"a", "b"} and documents.retrieved == {"a", "b", "c"}
    indexes = {1: "a#0", 2: "a#1", 5: "c#0"}  # chunk 9 unknown: left out
    chunks = outcome_of(answer, chunk_target=indexes.get)
    assert chunks.cited == {"a#0", "a#1"} and chunks.retrieved == {"a#0", "c#0"}
    no_results = SimpleNamespace(text=None, abstained=0, citations=[])
    assert outcome_of(no_results) == AnswerOutcome("", False, frozenset(), None)


def case(cited=(), *, abstained=False, text="", reference="", answerable=True, qrels=QRELS,
         retrieved=None) -> AnswerCase:  # fmt: skip
    outcome = AnswerOutcome(text, abstained, frozenset(cited), retrieved)
    return AnswerCase(AnswerQuestion("q", "?", qrels, reference, answerable), outcome)


def test_score_answer_counts_each_metric_where_it_applies():
    scores = score_answer(case({"a", "c"}, text="cat sat", reference="cat", retrieved={"a"}))
    assert scores == {
        "citation_precision": 0.5,
        "citation_recall": 0.5,
        "citation_recall_retrieved": 1.0,
        "abstention_accuracy": None,
        "false_abstention": 0.0,
        "token_f1": pytest.approx(2 / 3),
    }
    abstained = score_answer(case(abstained=True, text="I cannot say.", reference="cat"))
    assert abstained["false_abstention"] == 1.0
    assert abstained["citation_precision"] is None and abstained["citation_recall"] == 0.0
    assert abstained["token_f1"] == 0.0
    unanswerable = score_answer(case({"a"}, answerable=False, qrels={}))
    assert unanswerable["abstention_accuracy"] == 0.0
    assert [k for k, v in unanswerable.items() if v is not None] == ["abstention_accuracy"]
    unjudged = score_answer(case({"a"}, qrels={}, reference=""))
    assert unjudged["citation_precision"] is None and unjudged["token_f1"] is None


def test_score_answers_averages_each_metric_over_the_questions_it_counts():
    report = score_answers(
        [
            case({"a"}, text="cat", reference="cat"),  # P 1, R 0.5, F1 1
            case({"c"}, text="dog", reference="cat"),  # P 0, R 0, F1 0
            case(abstained=True, reference="cat"),  # P -, R 0, F1 0
            case(answerable=False, abstained=True, qrels={}),
            case({"a"}, answerable=False, qrels={}),
        ]
    )
    assert report["questions"] == 5
    assert report["answerable"] == 3 and report["unanswerable"] == 2
    assert report["citation_precision"] == 0.5 and report["citation_precision_n"] == 2
    assert report["citation_recall"] == pytest.approx(0.5 / 3)
    assert report["citation_recall_n"] == 3
    assert report["citation_recall_retrieved_n"] == 0
    assert report["abstention_accuracy"] == 0.5 and report["abstention_accuracy_n"] == 2
    assert report["false_abstention"] == pytest.approx(1 / 3)
    assert report["token_f1"] == pytest.approx(1 / 3)
    empty = score_answers([])
    assert all(empty[name] == 0.0 and empty[f"{name}_n"] == 0 for name in ANSWER_METRICS)


def test_run_answers_asks_each_question_and_keeps_what_the_set_says():
    asked = []

    def answer_fn(question: str) -> FakeAnswer:
        asked.append(question)
        if question == "unknown?":
            return FakeAnswer("The passages do not say.", abstained=True)
        return FakeAnswer("a cat", citations=(FakeCitation("a"),))

    questions = [
        AnswerQuestion("q1", "cat?", QRELS, reference="the cat"),
        AnswerQuestion("q2", "unknown?", {}, answerable=False),
    ]
    ticks = []
    cases = run_answers(answer_fn, questions, on_question=lambda: ticks.append(1))
    assert asked == ["cat?", "unknown?"] and len(ticks) == 2
    report = score_answers(cases)
    assert report["citation_precision"] == 1.0 and report["token_f1"] == 1.0
    assert report["abstention_accuracy"] == 1.0 and report["false_abstention"] == 0.0
