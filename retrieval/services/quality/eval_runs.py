"""Evaluation runs: a pipeline over a golden set, as a background task with progress.

:func:`create_eval_run` makes a queued :class:`~retrieval.models.EvalRun` and runs
:func:`execute` inline or on the queue's workers (as
:func:`~retrieval.services.ingestion.runs.enqueue_run` decides for index runs). Metrics
are those of :mod:`~retrieval.services.quality.evaluation` (trec_eval's definitions),
averaged over the queries with a relevant judgment.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.utils import timezone

from retrieval.exceptions import RetrievalError
from retrieval.models import EvalRun, EvalSet
from retrieval.services.access import Scope
from retrieval.services.quality import goldens
from retrieval.services.quality.evaluation import METRICS, document_ranking, percentile
from retrieval.services.query.search import pipeline_for, search
from retrieval.services.query.search_log import untraced
from retrieval.services.queues import enqueue_after_commit, runs_inline

logger = logging.getLogger(__name__)

#: Ranked targets kept per query in a run (enough for the metrics' cut-offs shown).
KEPT_RANKING = 10


def create_eval_run(
    eval_set: EvalSet,
    pipeline: str,
    *,
    top_k: int = 100,
    created_by: Any = None,
    sync: bool | None = None,
) -> EvalRun:
    """Queue an evaluation of ``pipeline`` over ``eval_set`` and schedule it; return the run.

    An unknown pipeline or a bad ``top_k`` raises :class:`RetrievalError` before anything
    is written.
    """
    if not isinstance(top_k, int) or top_k < 1:
        raise RetrievalError(f"top_k must be a positive integer, not {top_k!r}.")
    pipeline_for(eval_set.collection, pipeline=pipeline)  # names the configured ones
    run = EvalRun.objects.create(
        eval_set=eval_set,
        pipeline=pipeline,
        top_k=top_k,
        created_by=created_by if getattr(created_by, "pk", None) else None,
    )
    if runs_inline(sync):
        execute(run.pk)
        run.refresh_from_db()
        return run
    enqueue_after_commit(
        "evaluate",
        run.pk,
        label=f"retrieval.evaluate run {run.pk}",
        queued=lambda task_id: EvalRun.objects.filter(pk=run.pk).update(task_id=task_id),
        unreachable=lambda message: _fail(run.pk, message),
    )
    return run


def execute(run_id: int) -> None:
    """Run a queued evaluation to its end (the task a worker runs)."""
    now = timezone.now()
    taken = EvalRun.objects.filter(pk=run_id, status=EvalRun.Status.QUEUED).update(
        status=EvalRun.Status.RUNNING, started_at=now
    )
    if not taken:
        return
    run = EvalRun.objects.select_related("eval_set__collection").get(pk=run_id)
    try:
        metrics, per_query = evaluate_set(
            run.eval_set,
            run.pipeline,
            top_k=run.top_k,
            on_query=lambda done, total: _progress(run, done, total),
        )
    except Exception as e:
        logger.exception("Eval run #%s failed", run_id)
        _fail(run_id, f"{e.__class__.__name__}: {e}")
        return
    run.metrics, run.per_query = metrics, per_query
    run.status = EvalRun.Status.SUCCEEDED
    run.finished_at = timezone.now()
    run.message = f"{metrics['queries']} queries, nDCG@10 {metrics['ndcg@10']:.4f}"
    run.save(update_fields=["metrics", "per_query", "status", "finished_at", "message"])


def evaluate_set(
    eval_set: EvalSet,
    pipeline: str,
    *,
    top_k: int = 100,
    on_query: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Search every judged query of ``eval_set`` with ``pipeline``; return metrics and
    per-query results (metrics, milliseconds, the top ranked targets)."""
    judged = goldens.qrels(eval_set)
    queries = goldens.judged_queries(eval_set)
    if not queries:
        raise RetrievalError(
            f"Eval set {eval_set.name!r} has no query with an accepted relevant judgment."
        )
    chunks = eval_set.level == EvalSet.Level.CHUNKS
    per_query: dict[str, Any] = {}
    latencies: list[float] = []
    for done, (query_id, text) in enumerate(queries.items(), start=1):
        started = time.perf_counter()
        with untraced():
            results = search(
                text,
                collection=eval_set.collection,
                pipeline=pipeline,
                top_k=top_k,
                scope=Scope.ALL,  # a task for a set staff may see; it acts for no user
            )
        milliseconds = (time.perf_counter() - started) * 1000
        targets = [
            f"{r.chunk.document.external_id}#{r.chunk.index}"
            if chunks
            else r.chunk.document.external_id
            for r in results
        ]
        ranking = targets if chunks else document_ranking(targets)
        latencies.append(milliseconds)
        per_query[query_id] = {
            "text": text,
            "metrics": {
                name: metric(ranking, judged[query_id]) for name, metric in METRICS.items()
            },
            "ms": round(milliseconds, 2),
            "ranking": ranking[:KEPT_RANKING],
        }
        if on_query:
            on_query(done, len(queries))
    metrics: dict[str, Any] = {
        name: statistics.fmean(item["metrics"][name] for item in per_query.values())
        for name in METRICS
    }
    metrics.update(
        queries=len(per_query),
        latency_ms_p50=percentile(latencies, 50),
        latency_ms_p95=percentile(latencies, 95),
    )
    return metrics, per_query


def compare(first: EvalRun, second: EvalRun, *, metric: str = "ndcg@10") -> dict[str, Any]:
    """Compare two runs query by query on ``metric``: rows, wins, losses and ties of ``second``."""
    if metric not in METRICS:
        raise RetrievalError(f"Unknown metric {metric!r}; choose one of {', '.join(METRICS)}.")
    rows = []
    counts = {"wins": 0, "losses": 0, "ties": 0}
    for query_id in dict.fromkeys([*first.per_query, *second.per_query]):
        a = first.per_query.get(query_id)
        b = second.per_query.get(query_id)
        a_value = a["metrics"][metric] if a else None
        b_value = b["metrics"][metric] if b else None
        if a_value is None or b_value is None:
            outcome = "missing"
        elif abs(b_value - a_value) < 1e-9:
            outcome = "tie"
        else:
            outcome = "win" if b_value > a_value else "loss"
        if outcome != "missing":
            counts[{"tie": "ties", "win": "wins", "loss": "losses"}[outcome]] += 1
        rows.append(
            {
                "query_id": query_id,
                "text": (a or b)["text"],
                "first": a_value,
                "second": b_value,
                "delta": None if outcome == "missing" else b_value - a_value,
                "outcome": outcome,
                "first_ranking": a["ranking"] if a else [],
                "second_ranking": b["ranking"] if b else [],
            }
        )
    rows.sort(key=lambda row: (row["delta"] is None, -abs(row["delta"] or 0)))
    return {"metric": metric, "rows": rows, **counts}


def fail_under(
    metrics: dict[str, Any], thresholds: dict[str, float], *, names: Iterable[str] = METRICS
) -> list[str]:
    """Return a sentence per metric below its threshold (empty when all are met); ``names``
    are the metrics that may be held to one."""
    missed = []
    names = list(names)
    for name, threshold in thresholds.items():
        if name not in names:
            raise RetrievalError(f"Unknown metric {name!r}; choose from {', '.join(names)}.")
        if metrics[name] < threshold:
            missed.append(f"{name} {metrics[name]:.4f} < {threshold:g}")
    return missed


def _progress(run: EvalRun, done: int, total: int) -> None:
    EvalRun.objects.filter(pk=run.pk).update(queries_done=done, queries_total=total)


def _fail(run_id: int, message: str) -> None:
    EvalRun.objects.filter(pk=run_id).update(
        status=EvalRun.Status.FAILED, finished_at=timezone.now(), message=message
    )
