"""Evaluation: metrics against trec_eval (pytrec_eval), dataset errors, the command."""

from __future__ import annotations

import json
import random
import shutil
from io import StringIO
from pathlib import Path

import pytest
import pytrec_eval
from django.core.management import CommandError, call_command

from retrieval.conf import retrieval_settings
from retrieval.models import Collection, Document
from retrieval.services.quality.evaluation import (
    DatasetError,
    document_ranking,
    load_beir,
    percentile,
    score_run,
)
from retrieval.services.retrievers.bm25 import BM25Retriever
from tests.conftest import MINIBEIR


def random_run_and_qrels(seed: int) -> tuple[dict[str, list[str]], dict[str, dict[str, int]]]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(300)]
    qrels, run = {}, {}
    for q in range(60):
        judged = rng.sample(docs, rng.randint(1, 40))
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 2, 3, 4]) for d in judged}
        qrels[f"q{q}"][judged[0]] = rng.randint(1, 4)  # at least one relevant
        run[f"q{q}"] = rng.sample(docs, rng.randint(0, 150))
    return run, qrels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_metrics_agree_with_trec_eval(seed):
    run, qrels = random_run_and_qrels(seed)
    ours = score_run(run, qrels)
    # trec_eval ranks by score; give each list strictly decreasing scores.
    scored = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "map_cut.100"})
    per_query = evaluator.evaluate(scored)
    top10 = {q: {d: float(10 - i) for i, d in enumerate(docs[:10])} for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    queries = list(qrels)

    def mean(values):
        return sum(values) / len(values)

    assert ours["ndcg@10"] == pytest.approx(
        mean([per_query.get(q, {}).get("ndcg_cut_10", 0.0) for q in queries]), abs=1e-6
    )
    assert ours["recall@100"] == pytest.approx(
        mean([per_query.get(q, {}).get("recall_100", 0.0) for q in queries]), abs=1e-6
    )
    assert ours["map@100"] == pytest.approx(
        mean([per_query.get(q, {}).get("map_cut_100", 0.0) for q in queries]), abs=1e-6
    )
    assert ours["mrr@10"] == pytest.approx(
        mean([mrr.get(q, {}).get("recip_rank", 0.0) for q in queries]), abs=1e-6
    )


def test_percentile_matches_linear_interpolation():
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([], 50) == 0.0


def write_dataset(
    root: Path, *, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str, int]]
) -> Path:
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A copy of the tests' own BEIR set (the tests below edit it)."""
    dataset = shutil.copytree(MINIBEIR, tmp_path / "tiny")
    assert len(load_beir(dataset).judged_queries()) >= 10
    return dataset


def evaluate(*args: str) -> str:
    out = StringIO()
    call_command("retrieval_evaluate", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_evaluate_command_ingests_once_and_reports_metrics(keyword_settings, tiny):
    report = json.loads(
        evaluate("--dataset", str(tiny), "--collection", "tiny", "--retriever", "bm25", "--json")
    )
    assert {
        "ndcg@10",
        "recall@100",
        "mrr@10",
        "map@100",
        "queries",
        "latency_ms_p50",
        "latency_ms_p95",
    } <= set(report)
    dataset = load_beir(tiny)
    assert report["queries"] == len(dataset.judged_queries())
    assert report["documents_indexed"] == 40
    assert 0.6 < report["ndcg@10"] <= 1.0 and report["recall@100"] >= report["ndcg@10"] * 0.5
    # The same rankings, scored by trec_eval: the command's figures are its figures.
    retriever = BM25Retriever(**retrieval_settings.RETRIEVERS["bm25"]["OPTIONS"])
    collection = Collection.objects.get(name="tiny")
    scored = {}
    for query_id, text in dataset.judged_queries().items():
        results = retriever.retrieve(text, collection=collection, top_k=100)
        ranking = document_ranking([r.chunk.document.external_id for r in results])
        scored[query_id] = {d: float(100 - i) for i, d in enumerate(ranking)}
    trec = pytrec_eval.RelevanceEvaluator(dataset.qrels, {"ndcg_cut.10", "recall.100"})
    per_query = trec.evaluate(scored)
    for ours, theirs in (("ndcg@10", "ndcg_cut_10"), ("recall@100", "recall_100")):
        expected = sum(m[theirs] for m in per_query.values()) / len(dataset.judged_queries())
        assert report[ours] == pytest.approx(expected, abs=1e-6), ours
    p50, p95 = report["latency_ms_p50"], report["latency_ms_p95"]
    assert 0 < p50 <= p95  # a sanity check of the percentiles, not a speed target
    assert Document.objects.filter(collection__name="tiny").count() == 40
    again = json.loads(
        evaluate("--dataset", str(tiny), "--collection", "tiny", "--retriever", "bm25", "--json")
    )
    assert again["documents_skipped"] == 40 and again["documents_indexed"] == 0
    assert again["ndcg@10"] == report["ndcg@10"]
    text = evaluate(
        "--dataset", str(tiny), "--collection", "tiny", "--retriever", "bm25", "--top-k", "10"
    )
    assert "ndcg@10" in text and "latency" in text and "40 skipped" in text


@pytest.mark.django_db
def test_evaluate_command_errors_name_the_file_and_line(keyword_settings, tiny):
    with pytest.raises(CommandError, match=r"corpus.jsonl: no such file"):
        evaluate("--dataset", str(tiny / "missing"), "--collection", "x", "--retriever", "bm25")
    corpus = tiny / "corpus.jsonl"
    lines = corpus.read_text().splitlines()
    lines[4] = '{"_id": "d05", "title": "broken'
    corpus.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match=r"corpus.jsonl, line 5: not valid JSON"):
        evaluate("--dataset", str(tiny), "--collection", "x", "--retriever", "bm25")
    assert not Document.objects.exists()  # nothing ingested from a malformed corpus
    (tiny / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t2\n")
    with pytest.raises(CommandError, match=r"test.tsv, line 2: expected 3 tab-separated columns"):
        evaluate("--dataset", str(tiny), "--collection", "x", "--retriever", "bm25")
    with pytest.raises(CommandError, match="qrels/train.tsv: no such file"):
        evaluate(
            "--dataset", str(tiny), "--split", "train", "--collection", "x", "--retriever", "bm25"
        )


def test_dataset_errors_for_queries(tmp_path):
    root = write_dataset(
        tmp_path / "d", corpus=[{"_id": "1", "text": "x"}], queries=[{"text": "no id"}], qrels=[]
    )
    with pytest.raises(DatasetError, match=r"queries.jsonl, line 1: missing '_id'"):
        load_beir(root)
    write_dataset(
        root,
        corpus=[{"_id": "1", "text": "x"}],
        queries=[{"_id": "q", "text": "t"}],
        qrels=[("other", "1", 1)],
    )
    with pytest.raises(
        DatasetError, match=r"test.tsv, line 2: query 'other' is not in queries.jsonl"
    ):
        load_beir(root)
