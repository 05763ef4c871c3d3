"""``retrieval_evaluate --dataset DIR --collection NAME --retriever NAME``: score retrieval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.exceptions import RetrievalError
from retrieval.management.progress import progress_bar
from retrieval.services.collections import get_or_create_collection
from retrieval.services.evaluation import evaluate as run_evaluation
from retrieval.services.evaluation import load_beir
from retrieval.services.indexing import Source, ingest
from retrieval.services.scope import Scope
from retrieval.services.search import search


class Command(BaseCommand):
    help = (
        "Evaluate a retriever on a BEIR-layout dataset (corpus.jsonl, queries.jsonl, "
        "qrels/<split>.tsv): ingest the corpus if needed, run every judged query, and print "
        "nDCG@10, Recall@100, MRR@10, MAP@100 and query latency."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--dataset", required=True, type=Path, help="Folder of the dataset.")
        parser.add_argument(
            "--split", default="test", help="Which qrels/<split>.tsv (default test)."
        )
        parser.add_argument("--collection", required=True, help="Collection holding the corpus.")
        parser.add_argument("--retriever", help="Retriever alias (default: the collection's).")
        parser.add_argument(
            "--top-k", type=int, default=100, help="Results per query (default 100)."
        )
        parser.add_argument("--embedder", help="Embedder alias for a new collection.")
        parser.add_argument(
            "--chunker", default="whole", help="Chunker alias for a new collection (default whole)."
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["top_k"] < 1:
            raise CommandError("--top-k must be at least 1.")
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
            querying = bar.add_task("Querying", total=len(dataset.judged_queries()))

            def ranked_documents(text: str) -> list[str]:
                results = search(
                    text,
                    collection=collection,
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
        report = {
            **evaluation.as_dict(),
            "collection": collection.name,
            "retriever": options["retriever"] or collection.default_retriever or "default",
            "split": options["split"],
            "documents_indexed": run.documents_indexed,
            "documents_skipped": run.documents_skipped,
            "documents_failed": run.documents_failed,
        }
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
            return
        self.stdout.write(f"Corpus: {run.message}.")
        self.stdout.write(f"{report['queries']} judged queries, retriever {report['retriever']!r}:")
        for key in ("ndcg@10", "recall@100", "mrr@10", "map@100"):
            self.stdout.write(f"  {key:<11} {report[key]:.4f}")
        self.stdout.write(
            f"  latency     p50 {report['latency_ms_p50']:.1f} ms, "
            f"p95 {report['latency_ms_p95']:.1f} ms"
        )
