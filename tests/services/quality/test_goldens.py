"""Golden sets, evaluation runs and the ``retrieval_evaluate --eval-set`` gate.

Four tiny documents and the keyword embedder: for the query "hill" BM25 finds the one
document containing the word, while every keyword-free query embeds to the same
constant vector, closest to the document holding all three keywords.
"""

from __future__ import annotations

import json
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from retrieval.exceptions import RetrievalError
from retrieval.models import Chunk, EvalRun, EvalSet, Judgment
from retrieval.services.access import Scope
from retrieval.services.quality import goldens
from retrieval.services.quality.eval_runs import compare, create_eval_run
from retrieval.services.quality.evaluation import load_beir, score_run
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

TEXTS = {
    "river": "the river runs north",
    "sun": "the sun rises east",
    "hill": "up the hill",
    "mix": "north east up",
}


@pytest.fixture
def atlas(keyword_settings, retrieval_settings):
    retrieval_settings(
        PIPELINES={
            "lexical": {"retrievers": {"bm25": 1.0}},
            "semantic": {"retrievers": {"dense": 1.0}},
        }
    )
    return collection_of("atlas", TEXTS)


def chunk(external_id: str) -> Chunk:
    return Chunk.objects.get(document__external_id=external_id)


@pytest.fixture
def golden(atlas):
    eval_set = EvalSet.objects.create(name="atlas-gold", collection=atlas)
    goldens.judge(eval_set, "hill", chunk("hill"), grade=2)
    goldens.judge(eval_set, "hill", chunk("mix"), grade=0)
    goldens.judge(eval_set, "river north", chunk("river"), grade=1)
    goldens.judge(eval_set, "sun", chunk("sun"), grade=1)
    return eval_set


def test_judgments_are_kept_per_query_and_votes_never_override(golden):
    assert goldens.qrels(golden) == {
        "q1": {"hill": 2, "mix": 0},
        "q2": {"river": 1},
        "q3": {"sun": 1},
    }
    vote = goldens.judge(golden, "hill", chunk("hill"), grade=0, status="candidate")
    assert vote.status == "accepted" and vote.grade == 2  # the accepted judgment stands
    goldens.judge(golden, "hill", chunk("river"), grade=1, status="candidate", source="feedback")
    assert "river" not in goldens.qrels(golden)["q1"]  # candidates do not count
    with pytest.raises(RetrievalError, match="grade must be an integer from 0 to 3"):
        goldens.judge(golden, "hill", chunk("sun"), grade=7)
    chunks = EvalSet.objects.create(name="chunks", collection=golden.collection, level="chunks")
    assert goldens.judge(chunks, "sun", chunk("sun"), grade=1).target == "sun#0"


def test_a_run_scores_each_query_and_the_whole_set(golden):
    run = create_eval_run(golden, "lexical", sync=True)
    assert run.status == EvalRun.Status.SUCCEEDED, run.message
    assert run.queries_done == run.queries_total == 3
    assert set(run.per_query) == {"q1", "q2", "q3"}
    assert run.per_query["q1"]["ranking"][0] == "hill"
    assert run.per_query["q1"]["metrics"]["ndcg@10"] == 1.0
    rankings = {query_id: item["ranking"] for query_id, item in run.per_query.items()}
    expected = score_run(rankings, goldens.qrels(golden))
    assert {name: run.metrics[name] for name in expected} == pytest.approx(expected)
    percentiles = run.metrics["latency_ms_p50"], run.metrics["latency_ms_p95"]
    assert 0 < percentiles[0] <= percentiles[1]  # stored and ordered (not a speed target)

    semantic = create_eval_run(golden, "semantic", sync=True)
    assert semantic.per_query["q1"]["ranking"][0] == "mix"  # the constant vector's neighbour
    outcome = compare(run, semantic)
    hill = next(row for row in outcome["rows"] if row["query_id"] == "q1")
    assert hill["outcome"] == "loss" and hill["delta"] < 0
    assert outcome["losses"] >= 1
    assert outcome["wins"] + outcome["losses"] + outcome["ties"] == 3


def test_bad_runs_say_why(golden, atlas):
    with pytest.raises(RetrievalError, match="Unknown pipeline 'psychic'"):
        create_eval_run(golden, "psychic", sync=True)
    assert not EvalRun.objects.exists()
    empty = EvalSet.objects.create(name="empty", collection=atlas)
    run = create_eval_run(empty, "lexical", sync=True)
    assert run.status == EvalRun.Status.FAILED
    assert "has no query with an accepted relevant judgment" in run.message


def evaluate(*args: str) -> dict:
    out = StringIO()
    call_command("retrieval_evaluate", *args, "--json", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


def test_the_set_and_its_beir_export_score_the_same(golden, tmp_path):
    folder = goldens.export_beir(golden, tmp_path / "export")
    dataset = load_beir(folder)
    assert dataset.qrels == goldens.qrels(golden)
    assert len(list(dataset.corpus())) == 4
    for pipeline in ("lexical", "semantic"):
        from_set = evaluate("--eval-set", "atlas-gold", "--pipeline", pipeline)
        from_files = evaluate(
            "--dataset", str(folder), "--collection", "atlas", "--pipeline", pipeline
        )
        assert from_files["documents_skipped"] == 4  # the same documents, not re-indexed
        for name in ("ndcg@10", "recall@100", "mrr@10", "map@100"):
            assert from_set[name] == pytest.approx(from_files[name]), (pipeline, name)
        assert from_set["queries"] == from_files["queries"] == 3
    assert EvalRun.objects.filter(eval_set=golden).count() == 2  # kept for the history

    again = goldens.import_beir("imported", golden.collection, folder)
    assert goldens.qrels(again) == goldens.qrels(golden)
    assert Judgment.objects.filter(query__eval_set=again, source="import").count() == 4


def test_fail_under_exits_1_below_and_0_above_the_measured_value(golden):
    measured = evaluate("--eval-set", "atlas-gold", "--pipeline", "semantic")["ndcg@10"]
    assert 0 < measured < 1
    evaluate(
        "--eval-set",
        "atlas-gold",
        "--pipeline",
        "semantic",
        "--fail-under",
        f"ndcg@10={measured - 0.01}",
    )
    with pytest.raises(CommandError, match="Below the threshold: ndcg@10") as error:
        evaluate(
            "--eval-set",
            "atlas-gold",
            "--pipeline",
            "semantic",
            "--fail-under",
            f"ndcg@10={measured + 0.01}",
        )
    assert error.value.returncode == 1
    with pytest.raises(CommandError, match="No eval set named 'nope'; existing: atlas-gold"):
        evaluate("--eval-set", "nope")
    with pytest.raises(CommandError, match="either --eval-set NAME or --dataset DIR"):
        evaluate("--collection", "atlas")


def test_a_set_judging_chunks_ranks_chunks(atlas):
    chunks = EvalSet.objects.create(name="chunks", collection=atlas, level="chunks")
    goldens.judge(chunks, "sun", chunk("sun"), grade=1)
    run = create_eval_run(chunks, "lexical", sync=True)
    assert run.per_query["q1"]["ranking"] == ["sun#0"]
    assert run.metrics["ndcg@10"] == 1.0 and run.metrics["mrr@10"] == 1.0


def test_reference_answers_and_unanswerable_queries_survive_export_and_import(golden, tmp_path):
    golden.queries.filter(text="hill").update(reference_answer="Up the hill.")
    unanswerable = goldens.query_for(golden, "where is the sea")
    unanswerable.answerable = False
    unanswerable.save()
    folder = goldens.export_beir(golden, tmp_path / "export")
    lines = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    by_text = {line["text"]: line for line in lines}
    assert by_text["hill"] == {"_id": "q1", "text": "hill", "answer": "Up the hill."}
    assert by_text["where is the sea"]["answerable"] is False
    assert set(by_text["sun"]) == {"_id", "text"}  # plain BEIR where nothing differs
    dataset = load_beir(folder)
    assert dataset.answers == {"q1": "Up the hill."} and dataset.unanswerable == {"q4"}

    again = goldens.import_beir("imported", golden.collection, folder)
    imported = {q.text: q for q in again.queries.all()}
    assert imported["hill"].reference_answer == "Up the hill." and imported["hill"].answerable
    assert imported["sun"].reference_answer == ""
    # Kept although nothing judges it: nothing answers it.
    assert imported["where is the sea"].answerable is False
    questions = goldens.answer_questions(again)
    assert [(q.question_id, q.answerable) for q in questions] == [
        ("q1", True), ("q2", True), ("q3", True), ("q4", False)
    ]  # fmt: skip
    assert questions[0].qrels == {"hill": 2, "mix": 0} and questions[0].reference == "Up the hill."
    assert dataset.answer_questions() == questions


def test_a_set_without_reference_answers_measures_search_only(golden):
    assert goldens.answer_questions(golden) == []


def test_answer_fields_of_the_wrong_type_are_refused_naming_the_line(golden, tmp_path):
    folder = goldens.export_beir(golden, tmp_path / "export")
    queries = folder / "queries.jsonl"
    lines = queries.read_text().splitlines()
    for bad, message in (
        ({"answer": 42}, "'answer' must be a string"),
        ({"answerable": "no"}, "'answerable' must be true or false"),
    ):
        queries.write_text("\n".join([lines[0], json.dumps({**json.loads(lines[1]), **bad})]))
        with pytest.raises(RetrievalError, match=rf"queries.jsonl, line 2: {message}"):
            goldens.import_beir("bad", golden.collection, folder)
    assert not EvalSet.objects.filter(name="bad").exists()


# --- retrieval_evaluate --answers, through its --answer-function seam --------------------

ASKED: list[tuple[str, dict]] = []


def fake_answer(question: str, **options) -> SimpleNamespace:
    """Answer as a grounded answerer might: cite by keyword, abstain on the sea."""
    ASKED.append((question, options))
    if "sea" in question:
        return SimpleNamespace(text="The passages do not say.", abstained=True, citations=[])
    cited = [c for c in Chunk.objects.select_related("document") if question in c.content]
    citations = [
        SimpleNamespace(external_id=c.document.external_id, chunk_ids=(c.pk,)) for c in cited
    ]
    return SimpleNamespace(
        text=cited[0].content if cited else "", abstained=False, citations=citations
    )


@pytest.fixture
def answered(golden):
    golden.queries.filter(text="hill").update(reference_answer="Up the hill.")
    golden.queries.filter(text="sun").update(reference_answer="It rises in the east.")
    sea = goldens.query_for(golden, "the sea")
    sea.answerable = False
    sea.save()
    ASKED.clear()
    return golden


def test_evaluate_answers_reports_the_answer_metrics(answered, tmp_path):
    report = evaluate(
        "--eval-set", "atlas-gold", "--pipeline", "lexical", "--answers",
        "--answer-function", f"{__name__}.fake_answer", "--extractive",
    )  # fmt: skip
    answers = report["answers"]
    assert [question for question, _ in ASKED] == ["hill", "river north", "sun", "the sea"]
    options = ASKED[0][1]
    assert options["collection"] == answered.collection and options["pipeline"] == "lexical"
    assert options["extractive"] is True and options["llm"] is None
    assert options["scope"] is Scope.ALL
    assert answers["answerable"] == 3 and answers["unanswerable"] == 1
    # "hill" cites hill (relevant); "river north" cites nothing; "sun" cites sun.
    assert answers["citation_precision"] == 1.0 and answers["citation_precision_n"] == 2
    assert answers["citation_recall"] == pytest.approx(2 / 3)
    assert answers["abstention_accuracy"] == 1.0 and answers["false_abstention"] == 0.0
    # "up the hill" against "Up the hill.": 1; "the sun rises east" against "It rises in
    # the east.": sun rises east / it rises in east: P 2/3, R 2/4.
    assert answers["token_f1"] == pytest.approx((1 + 4 / 7) / 2)
    assert report["ndcg@10"] > 0  # the retrieval report is still there

    text = StringIO()
    call_command(
        "retrieval_evaluate", "--eval-set", "atlas-gold", "--pipeline", "lexical", "--answers",
        "--answer-function", f"{__name__}.fake_answer", stdout=text, stderr=StringIO(),
    )  # fmt: skip
    assert "Answers: 4 questions (3 answerable, 1 unanswerable)" in text.getvalue()
    assert "abstention_accuracy" in text.getvalue()

    # The same from the set's BEIR export.
    folder = goldens.export_beir(answered, tmp_path / "export")
    ASKED.clear()
    from_files = evaluate(
        "--dataset", str(folder), "--collection", "atlas", "--pipeline", "lexical", "--answers",
        "--answer-function", f"{__name__}.fake_answer",
    )  # fmt: skip
    assert from_files["answers"] == answers
    assert len(ASKED) == 4


def test_evaluate_answers_on_a_set_judging_chunks(atlas):
    chunks = EvalSet.objects.create(name="chunks", collection=atlas, level="chunks")
    goldens.judge(chunks, "sun", chunk("sun"), grade=1)
    chunks.queries.update(reference_answer="the sun rises east")
    report = evaluate(
        "--eval-set", "chunks", "--pipeline", "lexical", "--answers",
        "--answer-function", f"{__name__}.fake_answer",
    )  # fmt: skip
    assert report["answers"]["citation_precision"] == 1.0
    assert report["answers"]["citation_recall"] == 1.0
    assert report["answers"]["token_f1"] == 1.0


def test_evaluate_answers_says_what_is_missing(golden, answered):
    with pytest.raises(CommandError, match="Cannot import the answer function 'tests.nope.answer'"):
        evaluate("--eval-set", "atlas-gold", "--answers", "--answer-function", "tests.nope.answer")
    with pytest.raises(CommandError, match="--extractive and --llm go with --answers"):
        evaluate("--eval-set", "atlas-gold", "--extractive")
    golden.queries.update(reference_answer="", answerable=True)
    err = StringIO()
    out = StringIO()
    call_command(
        "retrieval_evaluate", "--eval-set", "atlas-gold", "--pipeline", "lexical", "--answers",
        "--answer-function", f"{__name__}.fake_answer", "--json", stdout=out, stderr=err,
    )  # fmt: skip
    assert json.loads(out.getvalue())["answers"] is None
    assert "answers not measured" in err.getvalue() and not ASKED


def test_fail_under_holds_answer_metrics_too(answered):
    fake = ("--answers", "--answer-function", f"{__name__}.fake_answer")
    gate = ("--eval-set", "atlas-gold", "--pipeline", "lexical")
    evaluate(*gate, *fake, "--fail-under", "citation_recall=0.66", "--fail-under", "ndcg@10=0")
    with pytest.raises(CommandError, match=r"Below the threshold: citation_recall 0.6667 < 0.7"):
        evaluate(*gate, *fake, "--fail-under", "citation_recall=0.7")
    with pytest.raises(CommandError, match="--fail-under token_f1 needs --answers"):
        evaluate(*gate, "--fail-under", "token_f1=0.1")
    with pytest.raises(CommandError, match="invalid threshold value: 'false_abstention=0.1'"):
        evaluate(*gate, *fake, "--fail-under", "false_abstention=0.1")  # lower is better
    answered.queries.update(reference_answer="", answerable=True)
    with pytest.raises(CommandError, match="no answer was measured"):
        evaluate(*gate, *fake, "--fail-under", "token_f1=0")


def test_evaluate_answers_with_the_extractive_answer_service(answered):
    """The real ``retrieval.answer`` (extractive: no model) answers the set as it is read."""
    report = evaluate(
        "--eval-set", "atlas-gold", "--pipeline", "lexical", "--answers", "--extractive"
    )  # fmt: skip
    answers = report["answers"]
    assert answers["questions"] == 4 and answers["unanswerable"] == 1
    # BM25 finds nothing for "the sea": the answer abstains; each other query's relevant
    # document is the passage it quotes and cites.
    assert answers["abstention_accuracy"] == 1.0 and answers["false_abstention"] == 0.0
    assert answers["citation_precision"] == 1.0 and answers["citation_recall"] == 1.0
    assert answers["citation_recall_retrieved_n"] == 3  # the answer lists what it retrieved
    # "up the hill" is the reference's words; "the sun rises east" only half of "It rises
    # in the east."
    assert 0 < answers["token_f1"] < 1
