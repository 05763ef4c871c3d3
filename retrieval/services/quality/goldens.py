"""Golden sets: judgments made by hand, imported from BEIR files, or voted for; BEIR export.

A set judges documents (their external ids) or chunks (``external_id#chunk_index``,
which survives reindexing as long as the chunking does not change). Only accepted
judgments count in evaluations; votes from the feedback endpoint arrive as candidates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import transaction

from retrieval.exceptions import RetrievalError
from retrieval.models import Chunk, Collection, EvalQuery, EvalSet, Judgment
from retrieval.services.quality import answer_metrics
from retrieval.services.quality.answer_metrics import AnswerQuestion
from retrieval.services.quality.evaluation import load_beir


def target_of(eval_set: EvalSet, chunk: Chunk) -> str:
    """Return what ``eval_set`` judges for ``chunk``: its document, or the chunk itself."""
    external_id = chunk.document.external_id
    if eval_set.level == EvalSet.Level.CHUNKS:
        return f"{external_id}#{chunk.index}"
    return external_id


def chunk_target(eval_set: EvalSet) -> Callable[[int], str | None] | None:
    """Return a chunk id -> target lookup for a set judging chunks (``None`` for documents).

    A chunk outside the set's collection has no target.
    """
    if eval_set.level != EvalSet.Level.CHUNKS:
        return None
    known: dict[int, str | None] = {}

    def target(pk: int) -> str | None:
        if pk not in known:
            chunks = Chunk.objects.select_related("document")
            found = chunks.filter(pk=pk, collection_id=eval_set.collection_id).first()
            known[pk] = None if found is None else target_of(eval_set, found)
        return known[pk]

    return target


def query_for(eval_set: EvalSet, text: str) -> EvalQuery:
    """Return the set's query with this text, adding it (id ``q<n>``) if it is new."""
    text = text.strip()
    if not text:
        raise RetrievalError("A judged query cannot be empty.")
    found = eval_set.queries.filter(text=text).first()
    if found is not None:
        return found
    # Lock the set so two judges adding queries at once do not pick the same id.
    EvalSet.objects.select_for_update().filter(pk=eval_set.pk).first()
    number = eval_set.queries.count() + 1
    query_id = f"q{number}"
    while eval_set.queries.filter(query_id=query_id).exists():
        number += 1
        query_id = f"q{number}"
    return EvalQuery.objects.create(eval_set=eval_set, query_id=query_id, text=text)


def judge(
    eval_set: EvalSet,
    query: str,
    chunk: Chunk,
    *,
    grade: int,
    status: str = Judgment.Status.ACCEPTED,
    source: str = "",
    user: Any = None,
) -> Judgment:
    """Record that ``chunk`` (or its document) answers ``query`` with ``grade`` (0 = not).

    A candidate (a vote) never overrides a judgment already accepted or rejected.
    """
    if chunk.collection_id != eval_set.collection_id:
        raise RetrievalError(
            f"Chunk {chunk.pk} is not in collection {eval_set.collection}, "
            f"which eval set {eval_set.name!r} judges."
        )
    if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= 3:
        raise RetrievalError(f"grade must be an integer from 0 to 3, not {grade!r}.")
    with transaction.atomic():
        eval_query = query_for(eval_set, query)
        target = target_of(eval_set, chunk)
        existing = Judgment.objects.filter(query=eval_query, target=target).first()
        if existing is not None and status == Judgment.Status.CANDIDATE:
            if existing.status != Judgment.Status.CANDIDATE:
                return existing
        judgment, _ = Judgment.objects.update_or_create(
            query=eval_query,
            target=target,
            defaults={
                "grade": grade,
                "status": status,
                "source": source,
                "created_by": user if getattr(user, "pk", None) else None,
            },
        )
    return judgment


def qrels(eval_set: EvalSet) -> dict[str, dict[str, int]]:
    """Return the set's accepted judgments as ``{query id: {target: grade}}``."""
    judged: dict[str, dict[str, int]] = {}
    rows = Judgment.objects.filter(
        query__eval_set=eval_set, status=Judgment.Status.ACCEPTED
    ).values_list("query__query_id", "target", "grade")
    for query_id, target, grade in rows.order_by("query__pk", "target"):
        judged.setdefault(query_id, {})[target] = grade
    return judged


def judged_queries(eval_set: EvalSet) -> dict[str, str]:
    """Return ``{query id: text}`` for the queries with an accepted relevant judgment."""
    relevant = {q for q, judged in qrels(eval_set).items() if any(g > 0 for g in judged.values())}
    return {
        query_id: text
        for query_id, text in eval_set.queries.order_by("pk").values_list("query_id", "text")
        if query_id in relevant
    }


def answer_questions(eval_set: EvalSet) -> list[AnswerQuestion]:
    """Return the set's questions that measure grounded answers (see
    :func:`~retrieval.services.quality.answer_metrics.answer_questions`)."""
    queries, answers, unanswerable = {}, {}, []
    rows = eval_set.queries.order_by("pk").values_list(
        "query_id", "text", "reference_answer", "answerable"
    )
    for query_id, text, reference, answerable in rows:
        queries[query_id] = text
        answers[query_id] = reference
        if not answerable:
            unanswerable.append(query_id)
    return answer_metrics.answer_questions(queries, qrels(eval_set), answers, unanswerable)


def export_beir(eval_set: EvalSet, directory: Path | str, *, split: str = "test") -> Path:
    """Write the set as a BEIR folder: the collection's documents, the queries, the qrels."""
    directory = Path(directory)
    (directory / "qrels").mkdir(parents=True, exist_ok=True)
    with (directory / "corpus.jsonl").open("w", encoding="utf-8") as f:
        documents = eval_set.collection.documents.order_by("external_id")
        for external_id, title, content in documents.values_list(
            "external_id", "title", "content"
        ).iterator():
            f.write(_line({"_id": external_id, "title": title, "text": content}))
    with (directory / "queries.jsonl").open("w", encoding="utf-8") as f:
        rows = eval_set.queries.order_by("pk").values_list(
            "query_id", "text", "reference_answer", "answerable"
        )
        for query_id, text, answer, answerable in rows:
            record: dict[str, Any] = {"_id": query_id, "text": text}
            # Only what differs from plain BEIR, so other readers see the file they expect.
            if answer:
                record["answer"] = answer
            if not answerable:
                record["answerable"] = False
            f.write(_line(record))
    with (directory / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for query_id, judged in qrels(eval_set).items():
            for target, grade in judged.items():
                f.write(f"{query_id}\t{target}\t{grade}\n")
    return directory


def import_beir(
    name: str,
    collection: Collection,
    directory: Path | str,
    *,
    split: str = "test",
    level: str = EvalSet.Level.DOCUMENTS,
) -> EvalSet:
    """Create (or extend) the set ``name`` from a BEIR folder's queries and qrels, at once.

    Queries without judgments in ``split`` are left out, except those marked
    ``"answerable": false`` (nothing answers them); a query's optional ``answer`` becomes
    its reference answer. The corpus is not read (ingest it with ``retrieval_ingest`` or
    ``retrieval_evaluate --dataset``).
    """
    dataset = load_beir(directory, split)
    kept = [*dataset.qrels, *(q for q in dataset.queries if q in dataset.unanswerable)]
    with transaction.atomic():
        eval_set, _ = EvalSet.objects.get_or_create(
            name=name, collection=collection, defaults={"level": level}
        )
        for query_id in dict.fromkeys(kept):
            eval_query, _ = EvalQuery.objects.update_or_create(
                eval_set=eval_set,
                query_id=query_id,
                defaults={
                    "text": dataset.queries[query_id],
                    "reference_answer": dataset.answers.get(query_id, ""),
                    "answerable": query_id not in dataset.unanswerable,
                },
            )
            judged = dataset.qrels.get(query_id, {})
            for target, grade in judged.items():
                Judgment.objects.update_or_create(
                    query=eval_query,
                    target=target,
                    defaults={
                        "grade": grade,
                        "status": Judgment.Status.ACCEPTED,
                        "source": "import",
                    },
                )
    return eval_set


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"
