"""External index engines the tests start themselves on 127.0.0.1: Chroma, Milvus Lite and
a Milvus server.

Each is a real server process (``chroma run``, ``milvus-lite server``, the Milvus 2.3
standalone server of the ``milvus`` package, see ``tests/support/milvus_standalone.py``) in its
own process group, on free ports, with its data in a temporary folder; it can be
stopped, or killed, and started again on the same data and ports (the fault tests).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
#: Kinds of engine: what each runs.
KINDS = ("chroma", "milvus", "milvus-server")
#: How long each may take to serve: a Milvus server needs 30-45 s on 2 busy cores.
START_SECONDS = {"chroma": 60.0, "milvus": 60.0, "milvus-server": 180.0}
#: How long a SIGTERM may take before SIGKILL (a Milvus server stops in 20 s or more).
STOP_SECONDS = {"chroma": 20.0, "milvus": 20.0, "milvus-server": 40.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    """One engine server: ``start()``, ``stop()``, and the index OPTIONS that reach it."""

    def __init__(self, kind: str, data: Path) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}.")
        self.kind, self.data, self.port = kind, data, free_port()
        self.process: subprocess.Popen | None = None
        #: A Milvus server's other ports (etcd, its parts, metrics), kept across restarts.
        self.ports: dict[str, int] = {}
        if kind == "milvus-server":
            from tests.support.milvus_standalone import EXTRA_PORTS, PORT_KEYS

            self.ports = {key: free_port() for key in (*PORT_KEYS, *EXTRA_PORTS)}
            self.ports["proxy_port"] = self.port

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
        if self.kind == "milvus-server":
            return [
                sys.executable,
                "-m",
                "tests.support.milvus_standalone",
                str(self.data),
                json.dumps(self.ports),
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

    def start(self, timeout: float | None = None) -> None:
        timeout = START_SECONDS[self.kind] if timeout is None else timeout
        log = (self.data.parent / f"{self.kind}.log").open("ab")
        self.process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
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
        if self.kind == "milvus-server":
            import urllib.request

            # Every part of the server up (the proxy answers before the query node is).
            health = f"http://127.0.0.1:{self.ports['metrics_port']}/healthz"
            with urllib.request.urlopen(health, timeout=2) as answer:
                if b"OK" not in answer.read():
                    raise RuntimeError("not healthy yet")
        from pymilvus import MilvusClient

        client = MilvusClient(uri=self.options["uri"], timeout=2)
        try:
            names = client.list_collections()
            if self.kind == "milvus-server":
                # Restarted on its data, it answers queries of the collections it had loaded
                # only after recovering them (~30 s here, even once they say "Loaded").
                for name in names:
                    if "NotLoad" not in str(client.get_load_state(name)["state"]):
                        client.query(name, filter="", output_fields=["count(*)"], timeout=2)
        finally:
            client.close()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not stopped in time."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_SECONDS[self.kind])
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the engine dies at once, whatever it was doing (its data stays)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def search_requests(self) -> tuple[int, int]:
        """Return the search requests a Milvus server's proxy received, and their query
        vectors, from its own metrics."""
        import re
        import urllib.request

        url = f"http://127.0.0.1:{self.ports['metrics_port']}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        requests = re.findall(
            r'^milvus_proxy_req_count\{function_name="Search",[^}]*status="total"\} (\S+)$',
            text,
            re.M,
        )
        vectors = re.findall(r"^milvus_proxy_search_vectors_count\{[^}]*\} (\S+)$", text, re.M)
        return int(sum(map(float, requests))), int(sum(map(float, vectors)))


class SlowProxy:
    """A TCP proxy on 127.0.0.1 in front of an engine's ``port`` that holds each piece of
    the engine's answers ``delay`` seconds (0 at first): an engine that answers, slowly,
    as one recovering does. Requests pass at once."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.delay = 0.0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]

    def __enter__(self) -> SlowProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        for each in self._sockets:
            each.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            engine = socket.create_connection(("127.0.0.1", self.target))
            self._sockets += [client, engine]
            threading.Thread(target=self._pump, args=(client, engine, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, slow: bool) -> None:
        try:
            while data := source.recv(65536):
                if slow and self.delay:
                    time.sleep(self.delay)
                sink.sendall(data)
        except OSError:  # either side closed
            pass
        finally:
            for each in (source, sink):
                each.close()
