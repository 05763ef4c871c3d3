"""``retrieval_evaluate``: score a pipeline on a golden set or a BEIR-layout dataset.

``--eval-set NAME --pipeline P`` evaluates a golden set of the database (the run is kept
and shows in the admin's history); ``--dataset DIR --collection NAME`` reads BEIR files.
``--fail-under ndcg@10=0.6`` exits with status 1 when a metric is below its threshold.
``--answers`` also measures grounded answers on the queries with reference answers or
marked unanswerable (``retrieval.answer``, or the callable ``--answer-function`` names).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.management.index_outbox import apply_index_outbox
from retrieval.management.progress import progress_bar
from retrieval.models import Collection, EvalRun, EvalSet
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.quality import goldens
from retrieval.services.quality.answer_metrics import (
    ANSWER_METRICS,
    GATED_ANSWER_METRICS,
    AnswerQuestion,
)
from retrieval.services.quality.answer_runs import answer_function, measure_answers
from retrieval.services.quality.eval_runs import create_eval_run, fail_under
from retrieval.services.quality.evaluation import METRICS, load_beir
from retrieval.services.quality.evaluation import evaluate as run_evaluation
from retrieval.services.query.search import search


def threshold(value: str) -> tuple[str, float]:
    name, sep, number = value.partition("=")
    if not sep or name.strip().lower() not in (*METRICS, *GATED_ANSWER_METRICS):
        raise ValueError(value)
    return name.strip().lower(), float(number)


class Command(BaseCommand):
    help = (
        "Evaluate a pipeline on a golden set (--eval-set) or a BEIR-layout dataset "
        "(--dataset: corpus.jsonl, queries.jsonl, qrels/<split>.tsv, the corpus ingested if "
        "needed) and print nDCG@10, Recall@100, MRR@10, MAP@100 and query latency; "
        "--fail-under METRIC=VALUE exits 1 when a metric is below VALUE."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--eval-set", help="Name of a golden set in the database.")
        parser.add_argument("--dataset", type=Path, help="Folder of a BEIR dataset.")
        parser.add_argument(
            "--split", default="test", help="Which qrels/<split>.tsv (default test)."
        )
        parser.add_argument(
            "--collection",
            help="Collection holding the dataset's corpus; with --eval-set, the set's collection.",
        )
        parser.add_argument("--pipeline", help="Pipeline alias (default: the collection's).")
        parser.add_argument("--retriever", help="Retriever alias, for --dataset only.")
        parser.add_argument(
            "--top-k", type=int, default=100, help="Results per query (default 100)."
        )
        parser.add_argument("--embedder", help="Embedder alias for a new collection.")
        parser.add_argument(
            "--chunker", default="whole", help="Chunker alias for a new collection (default whole)."
        )
        parser.add_argument(
            "--fail-under",
            action="append",
            default=[],
            type=threshold,
            metavar="METRIC=VALUE",
            help=f"Exit 1 if METRIC ({', '.join(METRICS)}; with --answers also "
            f"{', '.join(GATED_ANSWER_METRICS)}) is below VALUE; repeatable.",
        )
        parser.add_argument(
            "--answers",
            action="store_true",
            help="Also answer the queries with reference answers or marked unanswerable, and "
            "report citation precision/recall, abstention and token F1.",
        )
        parser.add_argument(
            "--answer-function",
            metavar="DOTTED.PATH",
            help="With --answers: the callable answering (default retrieval.answer); it takes "
            "the question and retrieval.answer's keyword arguments.",
        )
        parser.add_argument(
            "--extractive", action="store_true", help="With --answers: answer with no LLM."
        )
        parser.add_argument("--llm", help="With --answers: the LLMS alias that answers.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["top_k"] < 1:
            raise CommandError("--top-k must be at least 1.")
        if bool(options["eval_set"]) == bool(options["dataset"]):
            raise CommandError("Give either --eval-set NAME or --dataset DIR (one of them).")
        answering = [options[name] for name in ("answer_function", "extractive", "llm")]
        if any(answering) and not options["answers"]:
            raise CommandError("--answer-function, --extractive and --llm go with --answers.")
        thresholds = dict(options["fail_under"])
        answer_thresholds = {k: v for k, v in thresholds.items() if k in GATED_ANSWER_METRICS}
        if answer_thresholds and not options["answers"]:
            raise CommandError(f"--fail-under {', '.join(answer_thresholds)} needs --answers.")
        if options["eval_set"]:
            report = self.golden_set(options)
        else:
            report = self.beir(options)
        self.show(report, options)
        if answer_thresholds and not report.get("answers"):
            # Fail closed: a gate on answers nobody measured is not met.
            raise CommandError(
                f"--fail-under {', '.join(answer_thresholds)}: no query has a reference answer "
                "or is unanswerable, so no answer was measured."
            )
        try:
            missed = fail_under(
                report, {k: v for k, v in thresholds.items() if k not in answer_thresholds}
            )
            if answer_thresholds:
                missed += fail_under(
                    report["answers"], answer_thresholds, names=GATED_ANSWER_METRICS
                )
        except RetrievalError as e:
            raise CommandError(str(e)) from e
        if missed:
            raise CommandError("Below the threshold: " + "; ".join(missed) + ".", returncode=1)

    def golden_set(self, options: dict[str, Any]) -> dict[str, Any]:
        sets = EvalSet.objects.select_related("collection").filter(name=options["eval_set"])
        if options["collection"]:
            try:
                sets = sets.filter(collection=Scope.ALL.collection(options["collection"]))
            except RetrievalError as e:
                raise CommandError(str(e)) from e
        found = list(sets[:2])
        if not found:
            names = ", ".join(EvalSet.objects.values_list("name", flat=True)[:20]) or "(none)"
            raise CommandError(f"No eval set named {options['eval_set']!r}; existing: {names}.")
        if len(found) > 1:  # set names are unique within a collection only
            raise CommandError(
                f"Several collections have an eval set named {options['eval_set']!r}; "
                "name one with --collection."
            )
        eval_set = found[0]
        collection = eval_set.collection
        pipeline = (
            options["pipeline"]
            or collection.default_pipeline
            or retrieval_settings.DEFAULT_PIPELINE
        )
        try:
            run = create_eval_run(eval_set, pipeline, top_k=options["top_k"], sync=True)
        except RetrievalError as e:
            raise CommandError(str(e)) from e
        if run.status != EvalRun.Status.SUCCEEDED:
            raise CommandError(f"Eval run #{run.pk} failed: {run.message}")
        report = {
            **run.metrics,
            "eval_set": eval_set.name,
            "collection": collection.name,
            "pipeline": pipeline,
            "run": run.pk,
        }
        if options["answers"]:
            report["answers"] = self.answers(
                goldens.answer_questions(eval_set),
                options,
                collection=collection,
                pipeline=pipeline,
                retriever=None,
                chunk_target=goldens.chunk_target(eval_set),
            )
        return report

    def beir(self, options: dict[str, Any]) -> dict[str, Any]:
        if not options["collection"]:
            raise CommandError("--dataset needs --collection (the collection of its corpus).")
        if options["pipeline"] and options["retriever"]:
            raise CommandError("Name a --pipeline or a --retriever, not both.")
        try:
            dataset = load_beir(options["dataset"], options["split"])
            corpus_size = sum(1 for _ in dataset.corpus())  # validates every line first
            collection, _ = get_or_create_collection(
                options["collection"], embedder=options["embedder"], chunker=options["chunker"]
            )
        except RetrievalError as e:
            raise CommandError(str(e)) from e
        with progress_bar() as bar:
            ingesting = bar.add_task("Ingesting corpus", total=corpus_size)
            sources = (
                # An entry with a title but no text is still a document.
                Source.from_text(entry.text or entry.title, external_id=entry.id, title=entry.title)
                for entry in dataset.corpus()
            )
            run = ingest(
                collection, sources, total=corpus_size, on_result=lambda _: bar.advance(ingesting)
            )
            # Measure the engine, not PostgreSQL ranking what the engine lacks.
            apply_index_outbox(self, collection, out=self.stderr)
            querying = bar.add_task("Querying", total=len(dataset.judged_queries()))

            def ranked_documents(text: str) -> list[str]:
                results = search(
                    text,
                    collection=collection,
                    pipeline=options["pipeline"],
                    retriever=options["retriever"],
                    top_k=options["top_k"],
                    scope=Scope.ALL,  # a command acts for no user
                )
                return [r.chunk.document.external_id for r in results]

            try:
                evaluation = run_evaluation(
                    ranked_documents, dataset, on_query=lambda: bar.advance(querying)
                )
            except (RetrievalError, ValueError) as e:
                raise CommandError(str(e)) from e
            answers = (
                self.answers(
                    dataset.answer_questions(),
                    options,
                    collection=collection,
                    pipeline=options["pipeline"],
                    retriever=options["retriever"],
                    bar=bar,
                )
                if options["answers"]
                else None
            )
        report = {
            **evaluation.as_dict(),
            "collection": collection.name,
            "retriever": options["retriever"] or collection.default_retriever or "default",
            "pipeline": options["pipeline"] or "",
            "split": options["split"],
            "documents_indexed": run.documents_indexed,
            "documents_skipped": run.documents_skipped,
            "documents_failed": run.documents_failed,
            "corpus": run.message,
        }
        if options["answers"]:
            report["answers"] = answers
        return report

    def answers(
        self,
        questions: list[AnswerQuestion],
        options: dict[str, Any],
        *,
        collection: Collection,
        pipeline: str | None,
        retriever: str | None,
        chunk_target: Callable[[int], str | None] | None = None,
        bar: Any = None,
    ) -> dict[str, Any] | None:
        """Measure the answer function on ``questions``; ``None`` when there are none."""
        if not questions:
            self.stderr.write("No reference answers or unanswerable queries: answers not measured.")
            return None
        try:
            answer_fn = answer_function(
                options["answer_function"],
                collection=collection,
                scope=Scope.ALL,  # a command acts for no user
                pipeline=pipeline,
                retriever=retriever,
                llm=options["llm"],
                extractive=options["extractive"],
            )
            if bar is None:
                return measure_answers(answer_fn, questions, chunk_target=chunk_target)
            answering = bar.add_task("Answering", total=len(questions))
            return measure_answers(
                answer_fn,
                questions,
                chunk_target=chunk_target,
                on_question=lambda: bar.advance(answering),
            )
        except (RetrievalError, ValueError) as e:
            raise CommandError(str(e)) from e

    def show(self, report: dict[str, Any], options: dict[str, Any]) -> None:
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        if "corpus" in report:
            self.stdout.write(f"Corpus: {report['corpus']}.")
            what = (
                f"pipeline {report['pipeline']!r}"
                if report["pipeline"]
                else (f"retriever {report['retriever']!r}")
            )
        else:
            what = f"eval set {report['eval_set']!r} (run #{report['run']}), pipeline "
            what += repr(report["pipeline"])
        self.stdout.write(f"{report['queries']} judged queries, {what}:")
        for key in METRICS:
            self.stdout.write(f"  {key:<11} {report[key]:.4f}")
        self.stdout.write(
            f"  latency     p50 {report['latency_ms_p50']:.1f} ms, "
            f"p95 {report['latency_ms_p95']:.1f} ms"
        )
        if report.get("answers"):
            self.show_answers(report["answers"])

    def show_answers(self, answers: dict[str, Any]) -> None:
        self.stdout.write(
            f"Answers: {answers['questions']} questions "
            f"({answers['answerable']} answerable, {answers['unanswerable']} unanswerable):"
        )
        for name in ANSWER_METRICS:
            self.stdout.write(f"  {name:<26} {answers[name]:.4f}  (over {answers[name + '_n']})")
