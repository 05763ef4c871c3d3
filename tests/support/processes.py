"""Run the example project's manage.py in a child process, as a shell would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``manage.py ARGS`` with extra environment variables; capture its output."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def database_url(settings: dict[str, Any], name: str | None = None) -> str:
    """Return a DATABASE_URL for a database on the server of a Django connection."""
    return f"postgres://{settings['USER']}@/{name or settings['NAME']}?host={settings['HOST']}"


def start_manage(*args: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``manage.py ARGS`` in its own process group (to kill it with its children)."""
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
