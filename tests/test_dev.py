"""``dev.py demo`` stops what it started: once each, however it is stopped.

Real processes: a parent running ``dev.run_until_stopped`` over children that log each
SIGTERM they get and take a while to stop, as django-q2's cluster does (it hangs if a
second SIGTERM comes meanwhile).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import os, signal, sys, time
log = sys.argv[1]
def write(line):
    with open(log, "a") as f:
        f.write(line + "\\n")
stopping = []
def on_term(signum, frame):
    write("TERM")
    stopping.append(time.monotonic())
signal.signal(signal.SIGTERM, on_term)
write(f"up {os.getpid()}")
while not stopping or time.monotonic() - stopping[0] < 0.5:  # stopping takes a while
    time.sleep(0.02)
"""


def _start(commands: list[list[str]]) -> subprocess.Popen:
    """Start a parent (its own process group) running ``run_until_stopped(commands)``."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import dev; "
        f"sys.exit(dev.run_until_stopped({commands!r}, grace=10))"
    )
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _child(tmp_path: Path, name: str) -> tuple[list[str], Path]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    log = tmp_path / f"{name}.log"
    return [sys.executable, str(script), str(log)], log


def _wait_up(logs: list[Path]) -> list[int]:
    deadline = time.monotonic() + 30
    while not all(log.exists() and log.read_text().startswith("up ") for log in logs):
        assert time.monotonic() < deadline, "the children did not start"
        time.sleep(0.05)
    return [int(log.read_text().split()[1]) for log in logs]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterms_to_the_whole_group_stop_each_child_once(tmp_path):
    worker, worker_log = _child(tmp_path, "worker")
    site, site_log = _child(tmp_path, "site")
    parent = _start([worker, site])
    pids = _wait_up([worker_log, site_log])
    try:
        # A signal to the whole group (`timeout` sends one there after one to its child;
        # Ctrl-C does too), then another while the parent is stopping the site.
        os.killpg(parent.pid, signal.SIGTERM)
        time.sleep(0.2)
        os.kill(parent.pid, signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
        for log in (worker_log, site_log):
            assert log.read_text().splitlines()[1:] == ["TERM"]
        assert not any(_alive(pid) for pid in pids)
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_when_the_last_command_exits_the_others_are_stopped(tmp_path):
    worker, worker_log = _child(tmp_path, "worker")
    # The last command exits with 3 once the worker is up (its SIGTERM handler set).
    up = (
        f"import pathlib, time\nlog = pathlib.Path({str(worker_log)!r})\n"
        "while not (log.exists() and log.read_text().startswith('up ')):\n"
        "    time.sleep(0.02)\nexit(3)"
    )
    parent = _start([worker, [sys.executable, "-c", up]])
    (pid,) = _wait_up([worker_log])
    try:
        assert parent.wait(timeout=30) == 3
        assert worker_log.read_text().splitlines()[1:] == ["TERM"]
        assert not _alive(pid)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
