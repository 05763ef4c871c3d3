"""``retrieval_reindex [--collection NAME] [--changed-only] [--sync]``: index collections again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.management.index_outbox import apply_index_outbox
from retrieval.management.progress import progress_bar
from retrieval.models import Collection, IndexRun
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.host_registry import registrations
from retrieval.services.ingestion.ingest import IngestResult, listen
from retrieval.services.ingestion.runs import enqueue_run, sweep_stale_runs
from retrieval.services.queues import runs_inline
from retrieval.tasks import reindex_collection


class Command(BaseCommand):
    help = (
        "Index every document of a collection (default: of all collections) again from its "
        "source, on the queue's workers or, with --sync, here with a progress bar. Collections "
        "of registered host models (retrieval.host_models) are created if missing and "
        "backfilled with their objects. Marks runs whose worker died as failed first. Exits "
        "non-zero if a document failed."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--collection", help="Collection name (default: all).")
        parser.add_argument(
            "--changed-only",
            action="store_true",
            help="Only documents not indexed yet or whose source changed.",
        )
        parser.add_argument(
            "--sync", action="store_true", help="Run here and wait, not on the workers."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Host models' collections exist from their first save; a backfill creates them.
        for name in sorted({entry.collection for entry in registrations()}):
            if options["collection"] in (None, name):
                get_or_create_collection(name)
        collections = list(Collection.objects.order_by("name"))
        if options["collection"] is not None:
            collections = [c for c in collections if c.name == options["collection"]]
            if not collections:
                names = ", ".join(c.name for c in Collection.objects.order_by("name")) or "none"
                raise CommandError(
                    f"No collection named {options['collection']!r}; existing: {names}."
                )
        for run_id in sweep_stale_runs():
            self.stdout.write(f"IndexRun #{run_id}: its worker stopped; marked failed.")
        sync = options["sync"] or runs_inline()
        failed = 0
        for collection in collections:
            if sync:
                run = self._run_here(collection, options["changed_only"])
                failed += run.documents_failed + (run.status == IndexRun.Status.FAILED)
                self.stdout.write(
                    f"{collection.name}: IndexRun #{run.pk} {run.status}: {run.message}."
                )
                apply_index_outbox(self, collection)
            else:
                run = enqueue_run(
                    reindex_collection,
                    collection.pk,
                    changed_only=options["changed_only"],
                    collection=collection,
                    sync=False,
                )
                self.stdout.write(
                    f"{collection.name}: queued IndexRun #{run.pk} "
                    "(follow it in the admin or at /api/index-runs/)."
                )
        if failed:
            raise CommandError("Some documents failed; see the index runs' errors.")

    def _run_here(self, collection: Collection, changed_only: bool) -> IndexRun:
        with progress_bar() as bar:
            task = bar.add_task(collection.name, total=collection.documents.count())

            def advance(result: IngestResult) -> None:
                bar.advance(task)
                if result.outcome == "failed":
                    self.stderr.write(f"failed   {result.external_id}: {result.error}")

            with listen(advance):
                return enqueue_run(
                    reindex_collection,
                    collection.pk,
                    changed_only=changed_only,
                    collection=collection,
                    sync=True,
                )
