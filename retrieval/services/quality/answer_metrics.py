"""Grounded-answer metrics: citations against a golden set's judgments, abstention, token F1.

Every function here is pure: an answer is read through the small :class:`AnswerLike`
protocol (what :func:`retrieval.answer` returns), turned into an :class:`AnswerOutcome`
(the targets it cites, in the set's vocabulary) and scored against the question's qrels,
reference answer and ``answerable`` flag. Per question:

- **citation precision**: cited targets judged relevant (grade >= 1) / cited targets;
  only answers that cite something count (an abstention cites nothing to be wrong about).
- **citation recall**: relevant targets cited / relevant targets judged; an answer that
  abstains scores 0. **Retrieved citation recall** divides by the relevant targets among
  those the answer's retrieval returned instead, when the answer says what it retrieved:
  it leaves out what retrieval missed, so the two together tell a search miss from a
  citing miss.
- **abstention accuracy**: on questions marked unanswerable, 1 if the answer abstained;
  **false abstention**: on answerable ones, 1 if it did.
- **token F1**: SQuAD's overlap of the answer's words with the reference answer's (lower
  case, punctuation and the articles a/an/the removed), citation markers such as ``[1]``
  or ``[1, 2]`` dropped first; an abstention scores 0. Only answerable questions with a
  reference answer count.

Precision and both recalls count only answerable questions with at least one relevant
judgment. :func:`score_answers` averages each metric over the questions it counts and
says how many those were.
"""

from __future__ import annotations

import re
import statistics
import string
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: Metric names in the order reports show them.
ANSWER_METRICS = (
    "citation_precision",
    "citation_recall",
    "citation_recall_retrieved",
    "abstention_accuracy",
    "false_abstention",
    "token_f1",
)

#: The metrics a higher value of which is better (``retrieval_evaluate --fail-under`` takes them).
GATED_ANSWER_METRICS = tuple(name for name in ANSWER_METRICS if name != "false_abstention")


class CitationLike(Protocol):
    """A cited passage: its document's external id and the chunks it was made of."""

    external_id: str
    chunk_ids: Sequence[int]


class AnswerLike(Protocol):
    """What an answer function returns (:class:`retrieval.services.Answer` is one)."""

    text: str
    abstained: bool
    citations: Sequence[CitationLike]


@dataclass(frozen=True)
class AnswerOutcome:
    """An answer reduced to what is scored; ``retrieved`` is ``None`` when not known."""

    text: str
    abstained: bool
    cited: frozenset[str]
    retrieved: frozenset[str] | None = None


@dataclass(frozen=True)
class AnswerQuestion:
    """A question to answer, with its judgments, reference answer and ``answerable`` flag."""

    question_id: str
    text: str
    qrels: Mapping[str, int]
    reference: str = ""
    answerable: bool = True


@dataclass(frozen=True)
class AnswerCase:
    """A question and the answer it got."""

    question: AnswerQuestion
    outcome: AnswerOutcome


def outcome_of(
    answer: AnswerLike, *, chunk_target: Callable[[int], str | None] | None = None
) -> AnswerOutcome:
    """Reduce ``answer`` to the targets it cites (and retrieved, if it has ``results``).

    Targets are documents' external ids, or with ``chunk_target`` (a chunk id to its
    ``external_id#index`` target, ``None`` for an unknown chunk) chunks, for sets that
    judge chunks.
    """
    cited: set[str] = set()
    for citation in answer.citations:
        if chunk_target is None:
            cited.add(citation.external_id)
            continue
        cited.update(t for t in map(chunk_target, citation.chunk_ids) if t is not None)
    results = getattr(answer, "results", None)
    retrieved = None
    if results is not None:
        targets = (_result_target(result, chunk_target) for result in results)
        retrieved = frozenset(t for t in targets if t is not None)
    return AnswerOutcome(
        text=answer.text or "",
        abstained=bool(answer.abstained),
        cited=frozenset(cited),
        retrieved=retrieved,
    )


def _result_target(result: Any, chunk_target: Callable[[int], str | None] | None) -> str | None:
    if chunk_target is None:
        return result.chunk.document.external_id
    return chunk_target(result.chunk.pk)


# --- one question ----------------------------------------------------------------------


def relevant_targets(qrels: Mapping[str, int]) -> frozenset[str]:
    return frozenset(target for target, grade in qrels.items() if grade > 0)


def citation_precision(cited: Iterable[str], qrels: Mapping[str, int]) -> float | None:
    """Return the share of ``cited`` judged relevant; ``None`` when nothing is cited."""
    cited = set(cited)
    if not cited:
        return None
    return len(cited & relevant_targets(qrels)) / len(cited)


def citation_recall(
    cited: Iterable[str], qrels: Mapping[str, int], *, within: Iterable[str] | None = None
) -> float | None:
    """Return the share of relevant targets cited; ``None`` when none is relevant.

    With ``within`` (the retrieved targets), the share of the relevant ones retrieved.
    """
    relevant = relevant_targets(qrels)
    if within is not None:
        relevant = relevant & frozenset(within)
    if not relevant:
        return None
    return len(relevant & set(cited)) / len(relevant)


_CITATION_MARKER = re.compile(r"\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse white space (SQuAD)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def token_f1(prediction: str, reference: str) -> float:
    """Return SQuAD's token F1 of ``prediction`` against ``reference``.

    Citation markers (``[1]``, ``[2, 3]``) are not words of the answer: they are dropped.
    """
    predicted = normalize_answer(_CITATION_MARKER.sub(" ", prediction)).split()
    expected = normalize_answer(_CITATION_MARKER.sub(" ", reference)).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def score_answer(case: AnswerCase) -> dict[str, float | None]:
    """Return each metric of one question; ``None`` where the question does not count."""
    question, outcome = case.question, case.outcome
    scores: dict[str, float | None] = dict.fromkeys(ANSWER_METRICS)
    if not question.answerable:
        scores["abstention_accuracy"] = float(outcome.abstained)
        return scores
    scores["false_abstention"] = float(outcome.abstained)
    if relevant_targets(question.qrels):
        cited = frozenset() if outcome.abstained else outcome.cited
        scores["citation_precision"] = citation_precision(cited, question.qrels)
        scores["citation_recall"] = citation_recall(cited, question.qrels)
        if outcome.retrieved is not None:
            scores["citation_recall_retrieved"] = citation_recall(
                cited, question.qrels, within=outcome.retrieved
            )
    if question.reference.strip():
        reference = question.reference
        scores["token_f1"] = 0.0 if outcome.abstained else token_f1(outcome.text, reference)
    return scores


# --- a set -----------------------------------------------------------------------------


def score_answers(cases: Sequence[AnswerCase]) -> dict[str, float | int]:
    """Average each metric over the questions it counts (0.0 when none does).

    Besides the means, ``questions``, ``answerable`` and ``unanswerable`` count the
    questions, and ``<metric>_n`` how many each mean is over.
    """
    per_question = [score_answer(case) for case in cases]
    report: dict[str, float | int] = {
        "questions": len(cases),
        "answerable": sum(case.question.answerable for case in cases),
        "unanswerable": sum(not case.question.answerable for case in cases),
    }
    for name in ANSWER_METRICS:
        values = [s[name] for s in per_question if s[name] is not None]
        report[name] = statistics.fmean(values) if values else 0.0
        report[f"{name}_n"] = len(values)
    return report


def answer_questions(
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    answers: Mapping[str, str],
    unanswerable: Iterable[str] = (),
) -> list[AnswerQuestion]:
    """Return the questions that measure answers, in ``queries`` order.

    A query counts with a reference answer, a relevant judgment, or marked unanswerable;
    there are none when no query has a reference answer or is unanswerable (the set
    measures search only).
    """
    unanswerable = frozenset(unanswerable)
    if not unanswerable and not any(answers.values()):
        return []
    questions = []
    for query_id, text in queries.items():
        judged = qrels.get(query_id, {})
        reference = answers.get(query_id, "")
        answerable = query_id not in unanswerable
        if reference or not answerable or relevant_targets(judged):
            questions.append(AnswerQuestion(query_id, text, judged, reference, answerable))
    return questions


def run_answers(
    answer_fn: Callable[[str], AnswerLike],
    questions: Iterable[AnswerQuestion],
    *,
    chunk_target: Callable[[int], str | None] | None = None,
    on_question: Callable[[], None] | None = None,
) -> list[AnswerCase]:
    """Ask ``answer_fn`` each question; return the cases :func:`score_answers` scores."""
    cases = []
    for question in questions:
        outcome = outcome_of(answer_fn(question.text), chunk_target=chunk_target)
        cases.append(AnswerCase(question, outcome))
        if on_question:
            on_question()
    return cases
