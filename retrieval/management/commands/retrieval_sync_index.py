"""``retrieval_sync_index --collection NAME [--check] [--rebuild] [--move-to ALIAS]``: drain,
check, rebuild, or move a collection's vectors to another index."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.exceptions import RetrievalError
from retrieval.management.collections import collection_and_index
from retrieval.services.indexes import index_for, outbox, sync


class Command(BaseCommand):
    help = (
        "Apply a collection's pending index operations (the outbox), then with --check "
        "compare the index with PostgreSQL (exit 1 on any drift), or with --rebuild build "
        "a new space from PostgreSQL's vectors and switch to it."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--collection", required=True, help="Collection name or slug.")
        parser.add_argument(
            "--check", action="store_true", help="Compare the index's ids with PostgreSQL's."
        )
        parser.add_argument(
            "--rebuild", action="store_true", help="Rebuild the index from PostgreSQL, then swap."
        )
        parser.add_argument(
            "--move-to",
            metavar="ALIAS",
            help="Move the collection's vectors to index ALIAS (RETRIEVAL['INDEXES']), filled "
            "from PostgreSQL without embedding again.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        collection, index = collection_and_index(options["collection"])
        label = f"{collection.name!r} ({index.alias}, {type(index).__name__})"
        if options["move_to"]:
            try:
                sync.move(collection, options["move_to"])
            except RetrievalError as e:
                raise CommandError(str(e)) from e
            except Exception as e:  # the engine's reason, for the operator
                raise CommandError(
                    f"{e.__class__.__name__}: {e}. Searches rank in PostgreSQL until the "
                    "rebuild lands; run this command again with --rebuild."
                ) from e
            index = index_for(collection)
            label = f"{collection.name!r} ({index.alias}, {type(index).__name__})"
            self.stdout.write(f"Moved {label}: {index.count(collection)} vectors.")
        try:
            if options["rebuild"]:
                sync.rebuild(collection)
                self.stdout.write(f"Rebuilt the index of {label}.")
            result = outbox.drain(collection_id=collection.pk, include_waiting=True)
        except Exception as e:  # the engine's reason, for the operator
            raise CommandError(f"Index of {label}: {e.__class__.__name__}: {e}") from e
        if result.applied or result.failed:
            self.stdout.write(
                f"Applied {result.applied} pending operations, {result.failed} failed."
            )
        if result.failed:
            raise CommandError(
                f"{result.failed} operations could not be applied to {label}: {result.errors[-1]}"
            )
        if not options["check"]:
            return
        try:
            drift = sync.compare(collection)
        except Exception as e:
            raise CommandError(f"Index of {label}: {e.__class__.__name__}: {e}") from e
        if drift:
            self.stderr.write(f"Drift in {label}: {drift.describe()}")
            raise SystemExit(1)
        self.stdout.write(f"In sync: {label}: {drift.describe()}")
