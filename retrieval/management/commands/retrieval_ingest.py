"""``retrieval_ingest PATH [PATH ...] --collection NAME``: index files and folders."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from retrieval.exceptions import ParserUnavailable, RetrievalError, UnsupportedFileType
from retrieval.management.index_outbox import apply_index_outbox
from retrieval.management.progress import progress_bar
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import IngestResult, Source, ingest
from retrieval.services.ingestion.parsing import parser_for


class Command(BaseCommand):
    help = (
        "Index files and folders (recursively) into a collection, creating it with the "
        "default embedder if needed. Unchanged files are skipped; exits non-zero if any failed."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("paths", nargs="+", metavar="PATH", help="Files or folders to index.")
        parser.add_argument("--collection", required=True, help="Collection name.")
        parser.add_argument("--embedder", help="Embedder alias for a new collection.")
        parser.add_argument("--retriever", help="Default retriever alias for a new collection.")
        parser.add_argument(
            "--index", help="Vector index alias (RETRIEVAL['INDEXES']) for a new collection."
        )
        parser.add_argument("--force", action="store_true", help="Re-index unchanged files too.")
        parser.add_argument("--metadata", help="JSON object stored on every document.")

    def handle(self, *args: Any, **options: Any) -> None:
        metadata = _json_object(options["metadata"])
        files, missing, left_out = collect_files([Path(p) for p in options["paths"]])
        for external_id, reason in left_out:
            self.stdout.write(f"left out {external_id}: {reason}")
        if left_out and not files and not missing:
            raise CommandError(
                f"No file was indexed: {len(left_out)} left out, as no configured parser "
                "reads them (see RETRIEVAL['PARSERS'] and the extras in the docs' formats page)."
            )
        try:
            collection, created = get_or_create_collection(
                options["collection"],
                embedder=options["embedder"],
                retriever=options["retriever"],
                index=options["index"],
            )
        except RetrievalError as e:
            raise CommandError(str(e)) from e
        if not created and options["index"] and options["index"] != collection.index:
            raise CommandError(
                f"Collection {collection.name!r} uses index {collection.index!r}; an index is "
                "chosen when a collection is created: omit --index, or use a new collection."
            )
        if created:
            self.stdout.write(
                f"Created collection {collection.name!r} ({collection.embedder}, "
                f"{collection.dimensions} dimensions)."
            )
        results: list[IngestResult] = [
            IngestResult(str(path), "failed", error="no such file or folder") for path in missing
        ]
        with progress_bar() as bar:
            task = bar.add_task("Indexing", total=len(files))

            def on_result(result: IngestResult) -> None:
                results.append(result)
                bar.advance(task)

            sources = read_sources(files, metadata, on_unreadable=on_result)
            run = ingest(
                collection, sources, total=len(files), force=options["force"], on_result=on_result
            )
        self._report(results)
        self.stdout.write(f"IndexRun #{run.pk}: {run.message}.")
        if left_out:
            self.stdout.write(f"{len(left_out)} file{'s' * (len(left_out) != 1)} left out.")
        apply_index_outbox(self, collection)
        failed = sum(1 for r in results if r.outcome == "failed")
        if failed:
            raise CommandError(f"{failed} of {len(results)} documents failed.")

    def _report(self, results: list[IngestResult]) -> None:
        for result in results:
            if result.outcome == "indexed":
                self.stdout.write(
                    f"indexed  {result.external_id} "
                    f"({result.chunks} chunk{'s' * (result.chunks != 1)})"
                )
            elif result.outcome == "skipped":
                self.stdout.write(f"skipped  {result.external_id} (unchanged)")
            else:
                self.stdout.write(
                    self.style.ERROR(f"failed   {result.external_id}: {result.error}")
                )


def collect_files(
    paths: list[Path],
) -> tuple[list[tuple[Path, str]], list[Path], list[tuple[str, str]]]:
    """Return ``(file, external id)`` pairs, the paths that do not exist, and the
    ``(external id, reason)`` of each file of a folder left out.

    A folder contributes the files under it that some parser accepts; the others are
    left out with the reason (hidden ones silently); a file named explicitly is always
    tried. The external id is the path relative to the argument's parent, in POSIX form.
    """
    files: list[tuple[Path, str]] = []
    missing: list[Path] = []
    left_out: list[tuple[str, str]] = []
    for path in paths:
        if path.is_file():
            files.append((path, path.name))
        elif path.is_dir():
            base = path.resolve().parent
            for child in sorted(path.resolve().rglob("*")):
                relative = child.relative_to(base)
                if not child.is_file() or any(part.startswith(".") for part in relative.parts):
                    continue
                if _parseable(child):
                    files.append((child, relative.as_posix()))
                else:
                    kind = (
                        f"{child.suffix.lower()} files"
                        if child.suffix
                        else "files without an extension"
                    )
                    left_out.append((relative.as_posix(), f"no configured parser reads {kind}"))
        else:
            missing.append(path)
    return files, missing, left_out


def read_sources(
    files: list[tuple[Path, str]],
    metadata: dict[str, Any],
    *,
    on_unreadable: Callable[[IngestResult], None],
) -> Iterator[Source]:
    """Yield each file as a :class:`Source`; one that cannot be read (permissions, gone
    since it was listed) is reported to ``on_unreadable`` and the others go on."""
    for path, external_id in files:
        try:
            yield Source.from_path(path, external_id=external_id, metadata=metadata)
        except OSError as e:
            reason = f"cannot read the file: {e.strerror or e}"
            on_unreadable(IngestResult(external_id, "failed", error=reason))


def _parseable(path: Path) -> bool:
    try:
        parser_for(filename=path.name)
    except ParserUnavailable:
        return True  # tried, and reported failed naming the extra, rather than left out unsaid
    except UnsupportedFileType:
        return False
    return True


def _json_object(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CommandError(f"--metadata is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise CommandError("--metadata must be a JSON object.")
    return value
