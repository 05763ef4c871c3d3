"""Shared set-up for the benchmarks: Django on the example project's database, data paths."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
DATASETS = {"scifact": "train", "cranfield": "test"}
POOL = {"min_size": 4, "max_size": 8}


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    # As a production site runs: without DEBUG's query log, which costs every query a few
    # dozen microseconds (the example project's default since issue 60; kept explicit).
    os.environ.setdefault("DJANGO_DEBUG", "0")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    # Django's connection pool, as a production site would run: a hybrid search then
    # ranks its dense leg on a second connection beside BM25 (README: design notes).
    settings.DATABASES["default"].setdefault("OPTIONS", {})["pool"] = POOL

    call_command("migrate", verbosity=0)


def machine() -> str:
    """One line describing where the figures were measured."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
            "current_setting('shared_buffers')"
        )
        version, pgvector, shared_buffers = cursor.fetchone()
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{version.split(' on ')[0]} (shared_buffers {shared_buffers}), pgvector {pgvector}"
    )


def corpus_entries(name: str) -> list[dict]:
    with (SHARED_DATA / name / "corpus.jsonl").open() as f:
        return [json.loads(line) for line in f]


def table(headers: list[str], rows: list[list[object]]) -> str:
    """Render a Markdown table."""

    def cell(value: object) -> str:
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


CACHE = ROOT / "bench" / ".cache"


def run_over_datasets(description: str, run_dataset, *, more: Sequence[str] = ()) -> list:
    """The main() of a per-dataset bench: ``--datasets`` (default all), Django, the machine.

    ``more`` names sets beyond the BEIR ones that ``run_dataset`` knows; return its
    answers, in the order the sets were asked for.
    """
    import argparse

    names = [*DATASETS, *more]
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--datasets", nargs="+", default=names, choices=names)
    args = parser.parse_args()
    setup_django()
    print(f"Machine: {machine()}\n")
    return [run_dataset(name) for name in args.datasets]


def beir_sources(name: str):
    """Return a shared BEIR dataset's split, the dataset, and its non-empty entries as sources."""
    from retrieval.services.ingestion.ingest import Source
    from retrieval.services.quality.evaluation import load_beir

    split = DATASETS[name]
    dataset = load_beir(SHARED_DATA / name, split)
    sources = [
        Source.from_text(e.text or e.title, external_id=e.id, title=e.title)
        for e in dataset.corpus()
        if (e.text or e.title).strip()
    ]
    return split, dataset, sources


def copy_chunks(cursor, collection_id: int, rows, metadata=None) -> list[int]:
    """Bulk-load one chunk per document by COPY; return the new chunk ids in order.

    ``rows`` is a list of ``(document_id, content, vector or None)``. The chunks are
    whole documents, indexed without a context header; ``metadata`` (a dict per row) is
    each chunk's metadata, ``{}`` if not given.
    """
    import json

    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence('retrieval_chunk', 'id')) "
        "FROM generate_series(1, %s)",
        [len(rows)],
    )
    ids = [row[0] for row in cursor.fetchall()]
    metadata = ["{}"] * len(rows) if metadata is None else [json.dumps(m) for m in metadata]
    with cursor.copy(
        "COPY retrieval_chunk (id, collection_id, document_id, index, content, indexed_prefix, "
        'start, "end", heading_path, token_count, metadata, embedding) FROM STDIN'
    ) as copy:
        for chunk_id, (document_id, content, vector), meta in zip(ids, rows, metadata, strict=True):
            copy.write_row(
                (chunk_id, collection_id, document_id, 0, content, "", 0, len(content), "[]", 0,
                 meta, vector)
            )  # fmt: skip
    return ids
