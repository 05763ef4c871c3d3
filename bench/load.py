"""The example site under load: searches, uploads and reindexing for minutes, with the
indexing worker killed and PostgreSQL restarted on the way; then every upload accounted for.

    python bench/load.py [--minutes 10] [--readers 8] [--page-readers 2] [--editors 2]
                         [--web-workers 3] [--port 8765] [--llm-ms 100] [--keep]

Needs the ``load`` extra (Locust, gunicorn). A fresh data folder holds the run's embedded
PostgreSQL; this process migrates it, creates a reader and an editor, ingests
``project/sample_docs`` into the collection ``handbook`` (``load_site.py``) and starts, each
in its own process group: a local OpenAI-compatible server answering after ``--llm-ms``
(``load_llm.py``), gunicorn serving ``project.wsgi`` with ``load_settings.py`` (the
project's settings, plus a pipeline ``llm`` that rewrites each query through that server,
uploads indexed on the workers, no throttling), and ``manage.py qcluster``. Each search face
is first timed alone, one request at a time. Then Locust (``locustfile.py``, headless, in
its own process: its gevent patching stays out of here) runs readers searching through the
API (bm25, dense, hybrid, the ``llm`` pipeline) and the HTML search page, and editors
uploading Markdown files, asking reindexes and following their runs. At 30% of the run
the qcluster's process group is killed (SIGKILL) and a new cluster started; at 60%
PostgreSQL is restarted (``pg_ctl restart -m fast``); each once an index run is running (or
30 s later), so that it strikes one. Every 10 s the memory of each process is read.
Afterwards the queue is given up to ``--drain-timeout`` seconds to finish, and the report
(``load_report.py``) gives each face's throughput and latency beside its latency alone, the
errors by kind and by the fault they fall in, the memory over time, and the checks: each
accepted upload present once, indexed, with chunks; the index outbox empty;
``retrieval_sync_index --check`` clean; no run left queued or running; the servers' errors
from their logs.

Everything started here is stopped on the way out (an error or Ctrl-C too), PostgreSQL
included, and the data folder deleted unless ``--keep``. The logs stay in a folder whose
path is printed; ``python bench/load_report.py LOGS`` prints the report again from them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from load_site import (
    COLLECTION,
    PASSWORD,
    ROOT,
    busy_worker,
    checks,
    drain,
    pg_ctl,
    postgres_pids,
    runs_in_flight,
    set_up_site,
    stop_postgres,
)

BENCH = Path(__file__).resolve().parent
#: Each face of the search API: the body's retriever or pipeline.
FACES: dict[str, dict[str, str]] = {
    "api bm25": {"retriever": "bm25"},
    "api dense": {"retriever": "dense"},
    "api hybrid": {"retriever": "hybrid"},
    "api llm": {"pipeline": "llm"},
}
#: The HTML search page's face (the collection's default retriever, the hybrid).
PAGE = "page hybrid"
#: Questions a reader of the sample handbook would ask.
QUERIES = [
    "What is django-retrieval?",
    "Which databases are supported?",
    "How do I add it to my site?",
    "Do I need an API key?",
    "Can I try it without installing PostgreSQL?",
    "Which file types can I ingest?",
    "How do I index a folder of files?",
    "What happens if I ingest the same file twice?",
    "What happens if indexing fails halfway through a document?",
    "How are documents split into chunks?",
    "Can indexing run in the background?",
    "How do I follow an indexing job?",
    "How do I search from the command line?",
    "Which retrievers are there?",
    "When should I use hybrid search?",
    "Can I filter results?",
    "Is there a REST API?",
    "Can an LLM agent use it?",
    "How do I use OpenAI or a self-hosted embedding server?",
    "Can two collections use different embedders?",
    "What happens if I change a collection's embedder?",
    "migrate fails with extension vector is not available",
    "How do I measure search quality?",
    "what is chunk overlap",
    "BM25 k1 and b parameters",
    "approximate nearest neighbour search HNSW",
    "reciprocal rank fusion",
    "known limitations of the release",
]
#: Words the editors' notes are made of (the handbook's own vocabulary).
WORDS = (
    "index search chunk embedding vector query collection document retriever hybrid dense "
    "sparse rank fusion score worker queue upload reindex heading section token model server "
    "database postgres pgvector filter metadata pipeline rewrite rerank budget latency cache "
    "batch schedule replica scope access permission editor reader release note handbook"
).split()
#: Extra seconds after a fault during which its errors are taken to be its own.
GRACE = 10.0


def note_text(number: int) -> str:
    """Return the editors' Markdown note ``number``: a title and a few sections of prose."""
    rng = random.Random(number)
    sections = []
    for section in range(rng.randint(2, 4)):
        sentences = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."
            for _ in range(rng.randint(3, 6))
        ]
        sections.append(f"## Part {section + 1}\n\n{' '.join(sentences)}\n")
    return f"# Load note {number}\n\nNote {number} of the load bench.\n\n" + "\n".join(sections)


def answer_problem(face: str, body: dict[str, Any]) -> str:
    """What is wrong with a search's 200 answer: no results, or an LLM stage that failed."""
    if not body["results"]:
        return "no results"
    if face == "api llm":
        calls = body["trace"]["llm_calls"]
        if not calls:
            return "no LLM call"
        if any(call["error"] for call in calls):
            return f"LLM call failed: {calls[-1]['error'][:100]}"
    return ""


# --- the processes ---------------------------------------------------------------------------


class Processes:
    """What the run started, each in its own process group; stopped in reverse order."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs = logs
        self.env = env
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, label: str, argv: list[str], **env: str) -> subprocess.Popen:
        with (self.logs / f"{label}.log").open("ab") as log:
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**self.env, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started[label] = process
        return process

    def kill(self, label: str) -> None:
        """Kill ``label``'s whole process group at once (SIGKILL) and reap it."""
        process = self.started.pop(label)
        _signal_group(process, signal.SIGKILL)
        process.wait()

    def stop_all(self) -> None:
        """Ask each group to stop (SIGTERM), then kill what is left after 20 s."""
        for process in reversed(self.started.values()):
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in reversed(self.started.values()):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)  # children that outlived their parent
            process.wait()
        self.started.clear()


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def start_llm_server(processes: Processes, delay_ms: int) -> str:
    """Start the LLM server in its own process; return its base URL."""
    ready = processes.logs / "llm-url"
    processes.start("llm", [sys.executable, str(BENCH / "load_llm.py"), str(ready), str(delay_ms)])
    deadline = time.monotonic() + 30
    while not ready.exists() or not ready.read_text().endswith("\n"):
        if time.monotonic() > deadline or processes.started["llm"].poll() is not None:
            raise RuntimeError(f"The LLM server did not start: see {processes.logs / 'llm.log'}")
        time.sleep(0.1)
    return ready.read_text().strip()


def wait_for_http(url: str, process: subprocess.Popen, seconds: float = 120) -> None:
    import requests

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"The server exited with {process.returncode}: see its log.")
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer 200 within {seconds:g} s.")


# --- memory ----------------------------------------------------------------------------------


class MemorySampler(threading.Thread):
    """Read each started process's memory every ``every`` seconds (RSS; PostgreSQL's PSS summed)."""

    def __init__(self, processes: Processes, t0: float, every: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.processes = processes
        self.t0 = t0
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.samples.append(self.sample())
            self.stopping.wait(self.every)

    def sample(self) -> dict[str, Any]:
        import psutil

        sizes: dict[str, float] = {}
        for label, process in list(self.processes.started.items()):
            try:
                parent = psutil.Process(process.pid)
                family = [parent, *parent.children(recursive=True)]
            except psutil.Error:
                continue
            for member in family:
                role = label if member is parent else f"{label} child"
                try:
                    sizes[f"{role} {member.pid}"] = member.memory_info().rss
                except psutil.Error:
                    pass
        pids = postgres_pids()
        total = 0
        for pid in pids:
            try:
                total += psutil.Process(pid).memory_full_info().pss
            except psutil.Error:
                pass
        if pids:  # labelled by the postmaster: a restarted server is another process
            sizes[f"postgres {pids[0]}"] = total
        return {"t": time.time() - self.t0, "bytes": sizes}


# --- the baseline ----------------------------------------------------------------------------


def signed_in(base: str, username: str) -> Any:
    """Return a requests session signed in as ``username`` (the login form, CSRF token)."""
    import requests

    session = requests.Session()
    session.get(f"{base}/accounts/login/", timeout=30).raise_for_status()
    reply = session.post(
        f"{base}/accounts/login/",
        data={
            "username": username,
            "password": PASSWORD,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        allow_redirects=False,
        timeout=30,
    )
    if reply.status_code != 302:
        raise RuntimeError(f"Could not sign in as {username}: {reply.status_code}.")
    session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
    return session


def baseline(base: str, requests_per_face: int, workers: int) -> dict[str, list[float]]:
    """Time each search face alone: one request at a time, after every web worker has
    answered it (the first search of a face in a worker loads what it needs)."""
    from concurrent.futures import ThreadPoolExecutor
    from functools import partial

    session = signed_in(base, "reader")
    rng = random.Random(0)
    timings: dict[str, list[float]] = {}
    for face in [*FACES, PAGE]:
        with ThreadPoolExecutor(2 * workers) as pool:  # concurrent: every worker takes some
            list(pool.map(partial(ask, session, base, face), QUERIES[: 4 * workers]))
        timings[face] = [
            ask(session, base, face, rng.choice(QUERIES)) for _ in range(requests_per_face)
        ]
    return timings


def ask(session: Any, base: str, face: str, query: str) -> float:
    """Search ``query`` by ``face``; return the milliseconds it took (raise if it failed)."""
    start = time.perf_counter()
    if face == PAGE:
        reply = session.get(base + "/", params={"q": query, "collection": COLLECTION})
    else:
        body = {"collection": COLLECTION, "query": query, "top_k": 10, **FACES[face]}
        reply = session.post(base + "/api/search/", json=body)
    elapsed = (time.perf_counter() - start) * 1000
    if reply.status_code != 200:
        raise RuntimeError(f"{face} alone answered {reply.status_code}: {reply.text[:300]}")
    problem = "" if face == PAGE else answer_problem(face, reply.json())
    if problem:
        raise RuntimeError(f"{face} alone: {problem}")
    return elapsed


# --- the faults ------------------------------------------------------------------------------


def run_load(
    args: argparse.Namespace, processes: Processes, base: str, logs: Path, t0: float
) -> tuple[list[dict[str, Any]], int]:
    """Run Locust for the run's length, with the faults at their times; return the faults
    (label, start and end in seconds from ``t0``) and Locust's exit code."""
    seconds = int(args.minutes * 60)
    users = args.readers + args.page_readers + args.editors
    argv = [
        sys.executable, "-m", "locust", "-f", str(BENCH / "locustfile.py"), "--headless",
        "-u", str(users), "-r", str(max(1, users // 5)), "--run-time", f"{seconds}s",
        "--stop-timeout", "30", "--host", base, "--csv", str(logs / "locust"), "--only-summary",
    ]  # fmt: skip
    locust = processes.start(
        "locust",
        argv,
        LOAD_REQUESTS=str(logs / "requests.jsonl"),
        LOAD_JOURNAL=str(logs / "uploads.jsonl"),
        LOAD_READERS=str(args.readers),
        LOAD_PAGE_READERS=str(args.page_readers),
        LOAD_EDITORS=str(args.editors),
        LOAD_RUN_ID=str(int(t0)),
    )
    faults = [
        (0.3 * seconds, "worker killed and restarted", lambda: restart_cluster(processes)),
        (0.6 * seconds, "PostgreSQL restarted", lambda: pg_ctl("-m", "fast", "restart")),
    ]
    done: list[dict[str, Any]] = []
    while locust.poll() is None:
        if faults and time.time() - t0 >= faults[0][0]:
            _, label, fault = faults.pop(0)
            busy_worker(seconds=30)  # the fault strikes a run in progress, if one comes
            runs = runs_in_flight()
            start = time.time() - t0
            log(f"{start:6.1f} s: {label} ({runs}) ...")
            fault()
            done.append({"label": label, "start": start, "end": time.time() - t0, "runs": runs})
            log(f"{done[-1]['end']:6.1f} s: done")
        time.sleep(0.2)
    return done, locust.returncode


def start_web(processes: Processes, workers: int, port: int) -> subprocess.Popen:
    """Serve the site with gunicorn's sync workers, each request in the access log."""
    argv = [
        sys.executable, "-m", "gunicorn", "project.wsgi", "-w", str(workers),
        "-b", f"127.0.0.1:{port}", "--access-logfile", str(processes.logs / "access.log"),
        "--access-logformat", '%(t)s %(p)s "%(r)s" %(s)s %(M)sms',
    ]  # fmt: skip
    return processes.start("gunicorn", argv)


def restart_cluster(processes: Processes) -> None:
    processes.kill("qcluster")
    start_cluster(processes)


def start_cluster(processes: Processes) -> subprocess.Popen:
    return processes.start("qcluster", [sys.executable, "manage.py", "qcluster"])


# --- afterwards ------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- main --------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--readers", type=int, default=8, help="API readers")
    parser.add_argument("--page-readers", type=int, default=2, help="HTML search page readers")
    parser.add_argument("--editors", type=int, default=2)
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--llm-ms", type=int, default=100, help="the LLM server's answer time")
    parser.add_argument("--baseline", type=int, default=50, help="requests per face alone")
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        help="RETRIEVAL['RUN_HEARTBEAT_TIMEOUT'] of the site (default: the app's, 300 s)",
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=480, help="seconds the queue is given afterwards"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    parser.add_argument(
        "--output", type=Path, default=BENCH / "results" / "load-run1.txt", help="the report"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignoring it
    data = Path(tempfile.mkdtemp(prefix="retrieval-load-data-"))
    logs = Path(tempfile.mkdtemp(prefix="retrieval-load-logs-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "load_settings",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), str(BENCH), os.environ.get("PYTHONPATH")])
        ),
        "RETRIEVAL_DATA_DIR": str(data),
        "DJANGO_DEBUG": "0",
        "DJANGO_INSECURE_HTTP": "1",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        **{
            f"RETRIEVAL_THROTTLE_{scope}": "off" for scope in ("SEARCH", "UPLOAD", "WRITE", "GRAPH")
        },
    }
    if args.heartbeat_timeout:
        env["LOAD_RUN_HEARTBEAT_TIMEOUT"] = str(args.heartbeat_timeout)
    processes = Processes(logs, env)
    sampler = None
    log(f"Data in {data}; logs in {logs}.")
    try:
        env["LOAD_LLM_URL"] = start_llm_server(processes, args.llm_ms)
        os.environ.update(env)
        sys.path[:0] = [str(ROOT), str(BENCH)]
        log("Migrating and ingesting the sample documents ...")
        set_up_site()
        base = f"http://127.0.0.1:{args.port}"
        web = start_web(processes, args.web_workers, args.port)
        start_cluster(processes)
        wait_for_http(base + "/accounts/login/", web)
        log("Timing each face alone ...")
        alone = baseline(base, args.baseline, args.web_workers)
        log(f"Load for {args.minutes:g} minutes ...")
        t0 = time.time()
        sampler = MemorySampler(processes, t0)
        sampler.start()
        faults, locust_exit = run_load(args, processes, base, logs, t0)
        sampler.stopping.set()
        log("Waiting for the queue to drain ...")
        drained = drain(args.drain_timeout)
        results = checks(read_jsonl(logs / "uploads.jsonl"), env)
        from common import machine
        from load_report import report

        from retrieval.conf import retrieval_settings

        run = {
            "command": " ".join(["python bench/load.py", *map(shlex.quote, sys.argv[1:])]),
            "options": {k: v for k, v in vars(args).items() if isinstance(v, int | float)},
            "machine": machine(),
            "heartbeat": retrieval_settings.RUN_HEARTBEAT_TIMEOUT,
            "t0": t0,
            "alone": alone,
            "faults": faults,
            "memory": sampler.samples,
            "checks": results,
            "drained": drained,
            "locust_exit": locust_exit,
            "grace": GRACE,
        }
        (logs / "run.json").write_text(json.dumps(run, default=str))
        text = report(logs)
        print(text)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
        log(f"Report written to {args.output}; logs in {logs}.")
    finally:
        log("Stopping what the run started ...")
        if sampler is not None:
            sampler.stopping.set()
        processes.stop_all()
        stop_postgres()
        if args.keep:
            log(f"Data kept in {data}.")
        else:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
