"""``retrieval_prune_traces [--days N] [--batch-size N]``: delete old query traces."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.services.query.search_log import prune_traces


class Command(BaseCommand):
    help = (
        "Delete query traces older than RETRIEVAL['TRACE_RETENTION_DAYS'] (or --days), "
        "a batch at a time so a large backlog never holds long locks."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=float, help="Keep this many days (default: setting).")
        parser.add_argument(
            "--batch-size", type=int, default=1000, help="Traces per delete (default 1000)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            deleted = prune_traces(days=options["days"], batch_size=options["batch_size"])
        except ValueError as e:
            raise CommandError(f"--{str(e).replace('_', '-')}") from e
        self.stdout.write(f"Deleted {deleted} trace{'s' if deleted != 1 else ''}.")
