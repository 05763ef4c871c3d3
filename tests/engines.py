"""External index engines the tests start themselves on 127.0.0.1: Chroma and Milvus Lite.

Each is a real server process (``chroma run``, ``milvus-lite server``) in its own
process group, on a free port, with its data in a temporary folder; it can be stopped
and started again on the same data (the fault tests).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    """One engine server: ``start()``, ``stop()``, and the index OPTIONS that reach it."""

    def __init__(self, kind: str, data: Path) -> None:
        self.kind, self.data, self.port = kind, data, free_port()
        self.process: subprocess.Popen | None = None

    @property
    def options(self) -> dict:
        if self.kind == "chroma":
            return {"host": "127.0.0.1", "port": self.port}
        return {"uri": f"http://127.0.0.1:{self.port}"}

    def command(self) -> list[str]:
        if self.kind == "chroma":
            return [
                str(BIN / "chroma"),
                "run",
                "--path",
                str(self.data),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ]
        return [
            str(BIN / "milvus-lite"),
            "server",
            "--data-dir",
            str(self.data),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]

    def start(self, timeout: float = 60.0) -> None:
        log = (self.data.parent / f"{self.kind}.log").open("ab")
        self.process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited; see {log.name}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                self.ping()
                return
            except Exception:  # not serving yet
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"{self.kind} did not listen on port {self.port} within {timeout}s")

    def ping(self) -> None:
        """Make one real request through the engine's client library; raise if it fails."""
        if self.kind == "chroma":
            import chromadb

            chromadb.HttpClient(host="127.0.0.1", port=self.port).heartbeat()
            return
        from pymilvus import MilvusClient

        client = MilvusClient(uri=self.options["uri"], timeout=2)
        try:
            client.list_collections()
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
