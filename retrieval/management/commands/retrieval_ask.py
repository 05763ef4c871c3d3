"""``retrieval_ask "QUESTION" --collection NAME``: print a grounded answer and its citations."""

from __future__ import annotations

import json
import textwrap
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.exceptions import RetrievalError
from retrieval.management.commands.retrieval_search import parse_filters
from retrieval.models import QueryTrace
from retrieval.services.access import Scope
from retrieval.services.answers.service import answer
from retrieval.services.query.search_log import traced_as


class Command(BaseCommand):
    help = (
        "Answer a question from a collection's passages, citing them (an LLM from "
        'RETRIEVAL["ANSWERS"], else the passages\' own sentences); --json for JSON.'
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("question", help="What to ask.")
        parser.add_argument("--collection", required=True, help="Collection name or slug.")
        parser.add_argument("--retriever", help="Retriever alias (default: the collection's).")
        parser.add_argument("--pipeline", help="Pipeline alias (instead of --retriever).")
        parser.add_argument("--llm", help='LLM alias (default: ANSWERS["llm"]).')
        parser.add_argument(
            "--extractive", action="store_true", help="Answer with sentences, asking no model."
        )
        parser.add_argument("--top-k", type=int, help='Results retrieved (ANSWERS["top_k"]).')
        parser.add_argument("--filters", help='JSON filters, e.g. {"metadata": {"lang": "en"}}.')
        parser.add_argument(
            "--json", action="store_true", help="Print JSON: the answer, its citations, trace id."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["top_k"] is not None and options["top_k"] < 1:
            raise CommandError("--top-k must be at least 1.")
        try:
            with traced_as(QueryTrace.Source.COMMAND):
                result = answer(
                    options["question"],
                    collection=options["collection"],
                    scope=Scope.ALL,  # a command acts for no user
                    pipeline=options["pipeline"],
                    retriever=options["retriever"],
                    llm=options["llm"],
                    extractive=options["extractive"],
                    top_k=options["top_k"],
                    filters=parse_filters(options["filters"]),
                )
        except (RetrievalError, ValueError) as e:
            raise CommandError(str(e)) from e
        if options["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
            return
        self.stdout.write(textwrap.fill(result.text, width=88) + "\n")
        if result.abstained:
            self.stdout.write(self.style.WARNING(f"Abstained: {result.reason}"))
            for item in result.closest:
                self.stdout.write(f"  closest: {item['document']}  {item['title']}")
        elif result.reason:
            self.stdout.write(self.style.WARNING(f"({result.mode}: {result.reason})"))
        for citation in result.citations:
            where = citation.url or citation.external_id
            self.stdout.write(
                self.style.SUCCESS(f"[{citation.number}] ") + f"{citation.title or where}  {where}"
            )
            self.stdout.write(textwrap.indent(textwrap.fill(citation.quote, 84), "    "))
