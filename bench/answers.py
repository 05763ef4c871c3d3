"""Grounded answers on the real-docs sets: citation precision/recall, abstention, token F1.

    python bench/answers.py [--set flask,starlette,git,sphinx] [--mode extractive|llm]
                            [--llm-url http://127.0.0.1:8080/v1] [--model NAME] [--limit N]
    python bench/answers.py --sweep [--set ...]

Each set is indexed as ``realdocs.py`` indexes it under its default configuration (the
collection is reused when that bench left it), then every question of
``realdocs/<set>-questions.jsonl`` that ``realdocs/<set>-answers.jsonl`` gives a reference
answer, and every unanswerable question of that file, is asked of ``retrieval.answer``
(``--mode extractive``: no model; ``--mode llm``: the OpenAI-compatible server at
``--llm-url``, llama.cpp's for instance). A question's relevant documents are the files
its line lists. The metrics are ``retrieval.services.quality.answer_metrics``'s:

- citation precision: cited documents among the question's files / cited documents;
- citation recall: the question's files cited / its files; "retrieved" divides by those
  of its files the answer's search returned instead (what citing alone missed);
- abstention: unanswerable questions answered with an abstention; false abstention:
  answerable ones abstained on;
- token F1: SQuAD's word overlap of the answer with the reference answer.

An answers file holds ``{"id": "q01", "answer": "..."}`` for questions of the set and
``{"id": "u01", "question": "...", "answerable": false}`` for questions the documents do
not answer. ``--limit N`` asks the first N of each kind (a smoke run).

``--sweep`` searches each question once and measures the extractive answer from those
results under each candidate of ``ANSWERS["min_coverage"]`` (abstain below it) and
``extractive.MIN_SHARED_TERMS`` (leave out a sentence sharing fewer), printing the mean over
the sets of each metric: the defaults are the row that abstains most on unanswerable
questions for the fewest abstentions on answerable ones, citations kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import ROOT, machine, setup_django, table
from realdocs import SETS, DocSet, app_settings, default_collection

sys.path.insert(0, str(ROOT))  # this checkout's retrieval, as setup_django does

from retrieval.services.quality.answer_metrics import ANSWER_METRICS, AnswerQuestion  # noqa: E402

if TYPE_CHECKING:
    from retrieval.services.quality.answer_metrics import AnswerLike

ANSWERED_SETS = ("flask", "starlette", "git", "sphinx")
#: ``--sweep``'s candidates: ANSWERS["min_coverage"] and extractive.MIN_SHARED_TERMS.
MIN_COVERAGES = (None, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6)
MIN_SHARED = (1, 2, 3)
COLUMNS = {
    "citation_precision": "cit. P",
    "citation_recall": "cit. R",
    "citation_recall_retrieved": "cit. R (retrieved)",
    "abstention_accuracy": "abstained (unanswerable)",
    "false_abstention": "abstained (answerable)",
    "token_f1": "token F1",
}


def load_answers(name: str, folder: Path = SETS) -> tuple[dict[str, str], list[dict]]:
    """Return a set's reference answers by question id and its unanswerable questions."""
    references: dict[str, str] = {}
    unanswerable: list[dict] = []
    with (folder / f"{name}-answers.jsonl").open() as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            if record.get("answerable", True):
                references[record["id"]] = record["answer"]
            else:
                unanswerable.append(record)
    return references, unanswerable


def set_questions(
    questions: Sequence[dict],
    references: dict[str, str],
    unanswerable: Sequence[dict],
    *,
    docs_prefix: str = "docs/",
    limit: int | None = None,
) -> list[AnswerQuestion]:
    """Return the set's questions to answer: those with a reference answer, their files as
    the relevant documents (external ids ``docs_prefix + file``), then the unanswerable."""
    answerable = [
        AnswerQuestion(
            question_id=q["id"],
            text=q["question"],
            qrels={f"{docs_prefix}{file}": 1 for file in q["files"]},
            reference=references[q["id"]],
        )
        for q in questions
        if q["id"] in references
    ]
    unanswered = [
        AnswerQuestion(question_id=u["id"], text=u["question"], qrels={}, answerable=False)
        for u in unanswerable
    ]
    return answerable[:limit] + unanswered[:limit]


def row(label: str, mode: str, report: dict[str, Any]) -> list:
    """One table row: the set, the mode, the question counts and each metric (over n)."""
    cells = [label, mode, f"{report['answerable']} + {report['unanswerable']}"]
    for name in ANSWER_METRICS:
        count = report[f"{name}_n"]
        cells.append(f"{report[name]:.3f} ({count})" if count else "")
    return cells


def print_table(rows: list[list]) -> None:
    headers = ["set", "mode", "questions (answerable + not)", *COLUMNS.values()]
    print(table(headers, rows), flush=True)


def llm_settings(args: argparse.Namespace) -> dict:
    """The ``LLMS`` entry ``bench`` for ``--mode llm``: the server at ``--llm-url``."""
    return {
        "bench": {
            "BACKEND": "retrieval.services.llms.openai.OpenAIChatLLM",
            "OPTIONS": {
                "model": args.model,
                "base_url": args.llm_url,
                "timeout": args.timeout,
                "max_retries": 1,
                "cache": None,  # every answer from the model, never a cached one
            },
        }
    }


def run_set(
    name: str, args: argparse.Namespace, answer_fn: Callable[[str], AnswerLike] | None = None
) -> dict[str, Any]:
    """Index set ``name`` (if needed) and measure the answers to its questions."""
    from django.test.utils import override_settings

    from retrieval.services.access import Scope
    from retrieval.services.quality.answer_runs import answer_function, measure_answers

    docset, questions = asked_questions(name, args.limit)
    config = app_settings("default")
    if args.mode == "llm":
        config["LLMS"] = llm_settings(args)
    with override_settings(RETRIEVAL=config):
        collection = default_collection(docset, docset.documents_folder())
        if answer_fn is None:
            answer_fn = answer_function(
                collection=collection,
                scope=Scope.ALL,
                extractive=args.mode == "extractive",
                llm="bench" if args.mode == "llm" else None,
            )
        started = time.perf_counter()
        report = measure_answers(answer_fn, questions)
    print(f"{name} {args.mode}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return report


def asked_questions(name: str, limit: int | None = None) -> tuple[DocSet, list[AnswerQuestion]]:
    """Return set ``name`` and its questions to answer (see :func:`set_questions`)."""
    docset = DocSet(name)
    references, unanswerable = load_answers(name)
    questions = set_questions(
        docset.load_questions(),
        references,
        unanswerable,
        docs_prefix=f"{docset.documents_folder().name}/",
        limit=limit,
    )
    return docset, questions


def searched(name: str, limit: int | None = None) -> list[tuple[AnswerQuestion, list]]:
    """Return set ``name``'s questions, each with the results ``retrieval.answer`` would
    search (the collection indexed if needed)."""
    from django.test.utils import override_settings

    from retrieval.services.access import Scope
    from retrieval.services.answers.service import answer_settings
    from retrieval.services.query.search import search

    docset, questions = asked_questions(name, limit)
    with override_settings(RETRIEVAL=app_settings("default")):
        collection = default_collection(docset, docset.documents_folder())
        top_k = answer_settings()["top_k"]
        return [
            (q, list(search(q.text, collection=collection, scope=Scope.ALL, top_k=top_k)))
            for q in questions
        ]


def sweep(found: dict[str, list[tuple[AnswerQuestion, list]]]) -> list[list]:
    """One row per candidate: its values, then each metric's mean over the sets."""
    from retrieval.services.answers import extractive
    from retrieval.services.answers.service import extractive_answer
    from retrieval.services.quality.answer_metrics import AnswerCase, outcome_of, score_answers

    chosen, rows = extractive.MIN_SHARED_TERMS, []
    try:
        for shared in MIN_SHARED:
            extractive.MIN_SHARED_TERMS = shared  # read by extract() on each call
            for min_coverage in MIN_COVERAGES:
                reports = [
                    score_answers(
                        [
                            AnswerCase(
                                q,
                                outcome_of(
                                    extractive_answer(q.text, results, min_coverage=min_coverage)
                                ),
                            )
                            for q, results in cases
                        ]
                    )
                    for cases in found.values()
                ]
                rows.append([shared, min_coverage, *mean_metrics(reports)])
    finally:
        extractive.MIN_SHARED_TERMS = chosen
    return rows


def mean_metrics(reports: Sequence[dict[str, Any]]) -> list[float]:
    """Each metric's mean over the sets' ``reports``, citation F1 (of the mean precision
    and recall) after recall."""
    means = {name: sum(r[name] for r in reports) / len(reports) for name in ANSWER_METRICS}
    precision, recall = means["citation_precision"], means["citation_recall"]
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return [precision, recall, f1, *(means[name] for name in ANSWER_METRICS[2:])]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--set", default=",".join(ANSWERED_SETS), help="Sets, comma-separated.")
    parser.add_argument("--mode", choices=("extractive", "llm"), default="extractive")
    parser.add_argument("--llm-url", help="With --mode llm: the server's URL, ending in /v1.")
    parser.add_argument("--model", default="local", help="Model id sent to the server.")
    parser.add_argument("--timeout", type=float, default=60.0, help="Seconds per LLM call.")
    parser.add_argument("--limit", type=int, help="Ask only the first N questions of each kind.")
    parser.add_argument("--sweep", action="store_true", help="Extractive abstention candidates.")
    args = parser.parse_args(argv)
    if args.mode == "llm" and not args.llm_url:
        parser.error("--mode llm needs --llm-url")
    setup_django()
    print(f"Machine: {machine()}\n")
    if args.sweep:
        found = {name: searched(name, args.limit) for name in args.set.split(",")}
        headers = ["MIN_SHARED_TERMS", "min_coverage", "cit. P", "cit. R", "cit. F1"]
        print(f"Mean over {', '.join(found)}:")
        print(table([*headers, *list(COLUMNS.values())[2:]], sweep(found)), flush=True)
        return 0
    rows = [row(name, args.mode, run_set(name, args)) for name in args.set.split(",")]
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
