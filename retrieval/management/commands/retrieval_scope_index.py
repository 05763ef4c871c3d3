"""``retrieval_scope_index --collection NAME [--access TOKEN | --metadata JSON] [--remove]``:
give a scope its own HNSW graph, list them, or drop one."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.management.collections import collection_and_index
from retrieval.services.indexes.pgvector import PgvectorIndex, scope_index_name


class Command(BaseCommand):
    help = (
        "Build an HNSW index of one scope's vectors in a pgvector collection: the chunks of "
        "documents visible to an access token (--access group:7), or whose metadata contains "
        'an object (--metadata \'{"team": "docs"}\'). Searches under that scope (a reader '
        "holding the token, a filter containing the object) then walk it as fast as an open "
        "search, where a narrow scope is otherwise ranked row by row. Without a scope, lists "
        "the collection's; with --remove, drops one."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--collection", required=True, help="Collection name or slug.")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--access", metavar="TOKEN", help="An access token (group:7, ...).")
        scope.add_argument("--metadata", metavar="JSON", help="A JSON object of metadata.")
        parser.add_argument("--remove", action="store_true", help="Drop the scope's index.")

    def handle(self, *args: Any, **options: Any) -> None:
        collection, index = collection_and_index(options["collection"])
        if not isinstance(index, PgvectorIndex):
            raise CommandError(
                f"Collection {collection.name!r} is in index {index.alias!r} "
                f"({type(index).__name__}); scope indexes are pgvector's."
            )
        if options["access"] is None and options["metadata"] is None:
            if options["remove"]:
                raise CommandError("--remove needs the scope: --access or --metadata.")
            for scope in collection.scope_indexes:
                name = scope_index_name(collection.pk, scope)
                self.stdout.write(f"{name}  {json.dumps(scope)}")
            return
        scope = self._scope(options)
        try:
            if options["remove"]:
                if not index.remove_scope_index(collection, scope):
                    raise CommandError(f"No scope index of {json.dumps(scope)} to remove.")
                self.stdout.write(f"Dropped the index of {json.dumps(scope)}.")
            else:
                name = index.add_scope_index(collection, scope)
                self.stdout.write(f"Built {name} for {json.dumps(scope)}.")
        except ValueError as e:
            raise CommandError(str(e)) from e

    @staticmethod
    def _scope(options: dict[str, Any]) -> dict[str, Any]:
        if options["access"] is not None:
            return {"access": options["access"]}
        try:
            return {"metadata": json.loads(options["metadata"])}
        except json.JSONDecodeError as e:
            raise CommandError(f"--metadata is not JSON: {e}") from e
