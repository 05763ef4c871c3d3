"""``retrieval_search "QUERY" --collection NAME``: print the ranked chunks."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.exceptions import RetrievalError
from retrieval.models import QueryTrace
from retrieval.services.access import Scope
from retrieval.services.query.pipelines import retriever_alias
from retrieval.services.query.search import search
from retrieval.services.query.search_log import traced_as
from retrieval.services.rewriters.base import normalize_history


class Command(BaseCommand):
    help = "Search a collection and print the ranked chunks (or JSON with --json)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("query", help="What to search for.")
        parser.add_argument("--collection", required=True, help="Collection name or slug.")
        parser.add_argument("--retriever", help="Retriever alias (default: the collection's).")
        parser.add_argument("--pipeline", help="Pipeline alias (instead of --retriever).")
        parser.add_argument("--rewriter", help="Rewriter alias replacing the pipeline's rewrite.")
        parser.add_argument("--reranker", help="Reranker alias replacing the pipeline's rerank.")
        parser.add_argument(
            "--history",
            help='JSON turns for rewriters, e.g. [{"role": "user", "content": "..."}].',
        )
        parser.add_argument("--top-k", type=int, default=5, help="How many chunks (default 5).")
        parser.add_argument("--filters", help='JSON filters, e.g. {"metadata": {"lang": "en"}}.')
        parser.add_argument(
            "--json", action="store_true", help="Print JSON: the results and the query's trace."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["top_k"] < 1:
            raise CommandError("--top-k must be at least 1.")
        filters = parse_filters(options["filters"])
        history = parse_history(options["history"]) if options["history"] else None
        try:
            collection = Scope.ALL.collection(options["collection"])
            with traced_as(QueryTrace.Source.COMMAND):
                results = search(
                    options["query"],
                    collection=collection,
                    pipeline=options["pipeline"],
                    retriever=options["retriever"],
                    top_k=options["top_k"],
                    filters=filters,
                    history=history,
                    rewriter=options["rewriter"],
                    reranker=options["reranker"],
                    scope=Scope.ALL,  # a command acts for no user
                )
        except (RetrievalError, ValueError) as e:
            raise CommandError(str(e)) from e
        alias = options["pipeline"] or retriever_alias(collection, options["retriever"])
        if options["json"]:
            output = {
                "query": options["query"],
                "collection": collection.name,
                "retriever": alias,
                "results": [r.to_dict() for r in results],
                "trace": results.trace,
            }
            self.stdout.write(json.dumps(output, indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"{len(results)} results from {collection.name!r} ({alias}):\n")
        for result in results:
            chunk = result.chunk
            where = f"page {chunk.page}" if chunk.page else " › ".join(chunk.heading_path)
            self.stdout.write(
                self.style.SUCCESS(f"{result.rank + 1}. {result.score:.4f}  ")
                + f"{chunk.document.external_id}"
                + (f"  ·  {where}" if where else "")
            )
            self.stdout.write(textwrap.indent(chunk.content.strip(), "    ") + "\n")


def parse_filters(text: str | None) -> Any:
    """Return ``--filters`` parsed (``None`` if not given), or raise naming the fix."""
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CommandError(f"--filters is not valid JSON: {e}") from e


def parse_history(text: str) -> list[dict[str, str]]:
    """Return ``--history`` as ``{"role", "content"}`` turns (a string is a user turn), or
    raise naming the fix."""
    try:
        turns = json.loads(text)
    except json.JSONDecodeError as e:
        raise CommandError(f"--history is not valid JSON: {e}") from e
    if not isinstance(turns, list):
        raise CommandError(
            "--history must be a JSON array of turns: strings (earlier user messages) or "
            '{"role": "user" or "assistant", "content": "..."}.'
        )
    try:
        return normalize_history(turns)
    except ValueError as e:
        raise CommandError(f"--history: {e}") from e
