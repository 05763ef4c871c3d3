"""bench/answers.py's own parts: the answer files of the real-docs sets, the questions it
asks, and its metrics run with a stub answer function (no documents, no database)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval.services.quality.answer_runs import measure_answers

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench():
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH))
        spec = importlib.util.spec_from_file_location("bench_answers", BENCH / "answers.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


def questions_of(name: str) -> list[dict]:
    path = BENCH / "realdocs" / f"{name}-questions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["flask", "starlette", "git", "sphinx"])
def test_every_question_of_a_set_has_a_short_reference_and_eight_unanswerable(bench, name):
    references, unanswerable = bench.load_answers(name)
    asked = {q["id"]: q["question"] for q in questions_of(name)}
    assert set(references) == set(asked)
    assert all(0 < len(answer.split()) <= 60 for answer in references.values())
    assert len(unanswerable) >= 8
    ids = [u["id"] for u in unanswerable]
    assert len(set(ids)) == len(ids) and not set(ids) & set(asked)
    texts = [u["question"] for u in unanswerable]
    assert all(text.strip() and text not in asked.values() for text in texts)


def test_the_bench_asks_the_answered_questions_then_the_unanswerable(bench):
    questions = [
        {"id": "q1", "question": "How?", "files": ["a.rst", "b.rst"]},
        {"id": "q2", "question": "Not referenced", "files": ["c.rst"]},
    ]
    unanswerable = [{"id": "u1", "question": "Why not?", "answerable": False}]
    asked = bench.set_questions(questions, {"q1": "Thus."}, unanswerable)
    assert [(q.question_id, q.answerable) for q in asked] == [("q1", True), ("u1", False)]
    assert asked[0].qrels == {"docs/a.rst": 1, "docs/b.rst": 1}
    assert asked[0].reference == "Thus." and asked[1].qrels == {}
    assert bench.set_questions(questions, {"q1": "Thus."}, unanswerable * 3, limit=1) == asked


def test_a_stub_answer_function_is_scored_and_printed(bench, capsys):
    references, unanswerable = bench.load_answers("flask")
    questions = bench.set_questions(questions_of("flask"), references, unanswerable, limit=4)
    by_text = {q.text: q for q in questions}

    def perfect(question: str) -> SimpleNamespace:
        """Quote the reference and cite the first relevant file; abstain when none is."""
        asked = by_text[question]
        if not asked.answerable:
            return SimpleNamespace(text="The documents do not say.", abstained=True, citations=[])
        first = next(iter(asked.qrels))
        citation = SimpleNamespace(external_id=first, chunk_ids=())
        return SimpleNamespace(text=asked.reference, abstained=False, citations=[citation])

    report = measure_answers(perfect, questions)
    assert report["answerable"] == 4 and report["unanswerable"] == 4
    assert report["citation_precision"] == 1.0 and report["token_f1"] == 1.0
    assert report["abstention_accuracy"] == 1.0 and report["false_abstention"] == 0.0
    # q01 and q02 list several files; one cited of each.
    assert 0 < report["citation_recall"] < 1
    bench.print_table([bench.row("flask", "stub", report)])
    printed = capsys.readouterr().out
    assert "cit. P" in printed and "| flask | stub | 4 + 4 | 1.000 (4) |" in printed


def test_the_llm_mode_needs_a_server(bench):
    with pytest.raises(SystemExit) as exit:
        bench.main(["--mode", "llm"])
    assert exit.value.code == 2
