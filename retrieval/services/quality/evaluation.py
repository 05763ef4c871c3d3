"""Retrieval evaluation on BEIR-layout datasets: loading, running and scoring.

A line of ``queries.jsonl`` may carry two optional fields beyond BEIR's ``_id`` and
``text``, for measuring grounded answers: ``answer`` (a reference answer, a string) and
``answerable`` (``false`` for a question the corpus does not answer; default ``true``).
Readers that ignore them read the file as plain BEIR.

Metrics follow trec_eval's definitions: nDCG@10 with graded (linear) gains,
Recall@100 and MAP@100 over documents judged relevant (grade >= 1), MRR@10 the
reciprocal rank of the first relevant document in the top 10. Each is averaged
over the queries that have at least one relevant document.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.exceptions import RetrievalError
from retrieval.services.quality.answer_metrics import AnswerQuestion, answer_questions


class DatasetError(RetrievalError):
    """A dataset file is missing or malformed; the message names the file and line."""


@dataclass(frozen=True)
class CorpusEntry:
    id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR dataset: corpus, queries, and relevance judgements of one split."""

    corpus_path: Path
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    #: Reference answers by query id (only the queries that have one).
    answers: dict[str, str] = field(default_factory=dict)
    #: Ids of the queries marked ``"answerable": false``.
    unanswerable: frozenset[str] = frozenset()

    def corpus(self) -> Iterator[CorpusEntry]:
        """Yield the corpus entries in file order (read lazily: corpora can be large)."""
        for line_number, record in _jsonl(self.corpus_path):
            doc_id = _field(record, "_id", self.corpus_path, line_number)
            yield CorpusEntry(
                id=str(doc_id),
                title=str(record.get("title") or ""),
                text=str(_field(record, "text", self.corpus_path, line_number)),
            )

    def corpus_size(self) -> int:
        with self.corpus_path.open("rb") as f:
            return sum(1 for line in f if line.strip())

    def answer_questions(self) -> list[AnswerQuestion]:
        """Return the questions that measure grounded answers (none without reference
        answers or unanswerable queries)."""
        return answer_questions(self.queries, self.qrels, self.answers, self.unanswerable)

    def judged_queries(self) -> dict[str, str]:
        """Return the queries that have at least one relevant document, in qrels order."""
        return {
            qid: self.queries[qid]
            for qid, judged in self.qrels.items()
            if any(g > 0 for g in judged.values())
        }


def load_beir(directory: Path | str, split: str = "test") -> BeirDataset:
    """Read ``queries.jsonl`` and ``qrels/<split>.tsv``; check ``corpus.jsonl`` exists."""
    directory = Path(directory)
    corpus_path = _existing(directory / "corpus.jsonl")
    queries_path = _existing(directory / "queries.jsonl")
    qrels_path = _existing(directory / "qrels" / f"{split}.tsv")
    queries: dict[str, str] = {}
    answers: dict[str, str] = {}
    unanswerable: set[str] = set()
    for line_number, record in _jsonl(queries_path):
        query_id = str(_field(record, "_id", queries_path, line_number))
        queries[query_id] = str(_field(record, "text", queries_path, line_number))
        answer, answerable = _answer_fields(record, queries_path, line_number)
        if answer:
            answers[query_id] = answer
        if not answerable:
            unanswerable.add(query_id)
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            parts = line.rstrip("\n").split("\t")
            if not line.strip() or (line_number == 1 and parts[0] == "query-id"):
                continue
            if len(parts) != 3:
                raise DatasetError(
                    f"{qrels_path}, line {line_number}: expected 3 tab-separated columns"
                )
            query_id, doc_id, grade = parts
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(grade)
            except ValueError:
                raise DatasetError(
                    f"{qrels_path}, line {line_number}: score {grade!r} is not an integer"
                ) from None
            if query_id not in queries:
                raise DatasetError(
                    f"{qrels_path}, line {line_number}: "
                    f"query {query_id!r} is not in {queries_path.name}"
                )
    return BeirDataset(
        corpus_path=corpus_path,
        queries=queries,
        qrels=qrels,
        answers=answers,
        unanswerable=frozenset(unanswerable),
    )


def _answer_fields(record: dict, path: Path, line_number: int) -> tuple[str, bool]:
    """Return a query line's optional reference ``answer`` and ``answerable`` flag."""
    answer = record.get("answer", "")
    if answer is None:
        answer = ""
    if not isinstance(answer, str):
        raise DatasetError(f"{path}, line {line_number}: 'answer' must be a string")
    answerable = record.get("answerable", True)
    if not isinstance(answerable, bool):
        raise DatasetError(f"{path}, line {line_number}: 'answerable' must be true or false")
    return answer.strip(), answerable


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    return path


def _jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(
                    f"{path}, line {line_number}: not valid JSON ({e.msg})"
                ) from None
            except RecursionError:
                raise DatasetError(f"{path}, line {line_number}: JSON nested too deep") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path}, line {line_number}: expected a JSON object")
            yield line_number, record


def _field(record: dict, name: str, path: Path, line_number: int) -> object:
    if name not in record:
        raise DatasetError(f"{path}, line {line_number}: missing {name!r}")
    return record[name]


# --- metrics ---------------------------------------------------------------------------


def ndcg_at_k(ranking: Sequence[str], judged: dict[str, int], k: int = 10) -> float:
    gains = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    actual = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    return actual / ideal if ideal else 0.0


def recall_at_k(ranking: Sequence[str], judged: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, g in judged.items() if g > 0}
    return len(relevant.intersection(ranking[:k])) / len(relevant) if relevant else 0.0


def mrr_at_k(ranking: Sequence[str], judged: dict[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranking[:k]):
        if judged.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def average_precision_at_k(ranking: Sequence[str], judged: dict[str, int], k: int = 100) -> float:
    relevant = {d for d, g in judged.items() if g > 0}
    hits, total = 0, 0.0
    for i, d in enumerate(ranking[:k]):
        if d in relevant:
            hits += 1
            total += hits / (i + 1)
    return total / len(relevant) if relevant else 0.0


METRICS: dict[str, Callable[[Sequence[str], dict[str, int]], float]] = {
    "ndcg@10": lambda r, j: ndcg_at_k(r, j, 10),
    "recall@100": lambda r, j: recall_at_k(r, j, 100),
    "mrr@10": lambda r, j: mrr_at_k(r, j, 10),
    "map@100": lambda r, j: average_precision_at_k(r, j, 100),
}


def score_run(run: dict[str, Sequence[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Average every metric over the queries with at least one relevant document."""
    queries = [q for q, judged in qrels.items() if any(g > 0 for g in judged.values())]
    return {
        name: statistics.fmean(metric(run.get(q, []), qrels[q]) for q in queries)
        if queries
        else 0.0
        for name, metric in METRICS.items()
    }


def document_ranking(external_ids: Sequence[str]) -> list[str]:
    """Collapse a ranking of chunks to documents: each at the rank of its best chunk."""
    return list(dict.fromkeys(external_ids))


@dataclass(frozen=True)
class Evaluation:
    metrics: dict[str, float]
    queries: int
    latencies_ms: list[float]

    def as_dict(self) -> dict[str, float | int]:
        return {
            **self.metrics,
            "queries": self.queries,
            "latency_ms_p50": percentile(self.latencies_ms, 50),
            "latency_ms_p95": percentile(self.latencies_ms, 95),
        }


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile by linear interpolation (numpy's default)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def evaluate(
    search: Callable[[str], Sequence[str]],
    dataset: BeirDataset,
    *,
    on_query: Callable[[], None] | None = None,
) -> Evaluation:
    """Run ``search`` (query text -> ranked document ids) over every judged query."""
    run: dict[str, list[str]] = {}
    latencies = []
    for query_id, text in dataset.judged_queries().items():
        started = time.perf_counter()
        run[query_id] = document_ranking(search(text))
        latencies.append((time.perf_counter() - started) * 1000)
        if on_query:
            on_query()
    return Evaluation(
        metrics=score_run(run, dataset.qrels), queries=len(run), latencies_ms=latencies
    )
