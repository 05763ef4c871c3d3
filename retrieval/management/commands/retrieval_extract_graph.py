"""``retrieval_extract_graph --collection NAME [--changed-only]``: build the knowledge graph."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.exceptions import RetrievalError
from retrieval.management.progress import progress_bar
from retrieval.models import IndexRun
from retrieval.services.access import Scope
from retrieval.services.graph.extraction import extract_graph


class Command(BaseCommand):
    help = "Extract knowledge-graph triples from a collection's chunks, recorded in an IndexRun."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--collection", required=True, help="Collection name or slug.")
        parser.add_argument(
            "--changed-only",
            action="store_true",
            help="Extract only chunks whose text was not extracted before.",
        )
        parser.add_argument("--extractor", help="Extractor alias (default: DEFAULT_EXTRACTOR).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            collection = Scope.ALL.collection(options["collection"])
            with progress_bar() as bar:
                task = bar.add_task("Extracting triples", total=None)

                def advance(run: IndexRun) -> None:
                    bar.update(task, total=run.documents_total, completed=run.documents_done)

                run = extract_graph(
                    collection,
                    changed_only=options["changed_only"],
                    extractor=options["extractor"],
                    on_progress=advance,
                )
        except RetrievalError as e:
            raise CommandError(str(e)) from e
        for error in run.errors[:20]:
            self.stderr.write(
                f"failed: {error['document']} chunk {error.get('chunk')}: {error['error']}"
            )
        if run.status != IndexRun.Status.SUCCEEDED:
            raise CommandError(f"Graph extraction run #{run.pk} failed: {run.message}")
        self.stdout.write(self.style.SUCCESS(f"Run #{run.pk}: {run.message}."))
