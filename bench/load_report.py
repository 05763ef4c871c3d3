"""The report of ``bench/load.py``'s run, in Markdown: latency and throughput per face beside
each search face alone, errors by kind and by the fault they fall in, memory over time, the
checks after the run, and what the servers' logs say about each error."""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from common import table

#: A process's memory is flat if its last window is within this share (or MB) of its first
#: window after warm-up.
FLAT_SHARE = 0.05
FLAT_MB = 5.0
MB = 1024 * 1024
#: The start of a log record: a date (ours, django-q2's) or gunicorn's bracketed one.
LOG_RECORD = re.compile(r"^\[?\d{4}-\d\d-\d\d |^Process ")
SEARCHES = ("api bm25", "api dense", "api hybrid", "api llm", "page hybrid")


def percentile(values: list[float], share: float) -> float:
    """Return the nearest-rank percentile (``share`` in 0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] if ordered else float("nan")


def kind(request: dict[str, Any]) -> str:
    """Name a failed request's kind: ``HTTP 502``, the connection error's class, or the check."""
    status = request["status"]
    if status == 0:
        return request["error"].split(":", 1)[0] or "no answer"
    if status >= 400:
        return f"HTTP {status}"
    return request["error"].split(": ", 1)[-1][:60]  # a check of the locustfile's


def failed(request: dict[str, Any]) -> bool:
    return bool(request["error"]) or request["status"] == 0 or request["status"] >= 400


def cause(request: dict[str, Any], faults: list[dict[str, Any]], grace: float) -> str:
    """The fault whose window (its length plus ``grace``) the request overlaps, else
    "unexplained"."""
    start, end = request["at"], request["at"] + request["ms"] / 1000
    for fault in sorted(faults, key=lambda f: "PostgreSQL" not in f["label"]):
        if start <= fault["end"] + grace and end >= fault["start"]:
            return fault["label"]
    return "unexplained"


def report(logs: Path) -> str:
    """Return the report of the run whose logs are in ``logs`` (``run.json`` and the rest)."""
    run = json.loads((logs / "run.json").read_text())
    options = SimpleNamespace(**run["options"])
    t0, faults, grace = run["t0"], run["faults"], run["grace"]
    seconds = options.minutes * 60
    requests = [json.loads(line) for line in (logs / "requests.jsonl").open() if line.strip()]
    for request in requests:
        request["at"] = request["t"] - t0
    sections = [
        header(run, options, len(requests)),
        faces(requests, run["alone"], seconds),
        errors(requests, faults, grace),
        timeline(requests, seconds),
        memory_tables(run["memory"], seconds, logs),
        upload_checks(run["checks"], t0, faults, grace),
        log_lines(logs),
    ]
    return "\n\n".join(sections)


def header(run: dict[str, Any], options: Any, n: int) -> str:
    t0, faults, drained = run["t0"], run["faults"], run["drained"]
    lines = [
        "# Load run",
        "",
        f"`{run['command']}`",
        "",
        f"- Machine: {run['machine']}.",
        f"- Served by gunicorn, {options.web_workers} sync workers; `manage.py qcluster` "
        "(django-q2, ORM broker, 1 worker); the LLM stage answered after "
        f"{options.llm_ms} ms by a local server; RUN_HEARTBEAT_TIMEOUT {run['heartbeat']} s.",
        f"- {options.minutes:g} min; {options.readers} API readers, {options.page_readers} "
        f"search-page readers, {options.editors} editors; {n} requests. Locust exited with "
        f"{run['locust_exit']} "
        "(1 if any request failed).",
    ]
    lines += [
        f"- {fault['label'][0].upper()}{fault['label'][1:]} at {fault['start']:.1f} s "
        f"({time.strftime('%H:%M:%S', time.localtime(t0 + fault['start']))}; index runs then: "
        f"{fault['runs']}), done at {fault['end']:.1f} s."
        for fault in faults
    ]
    lines.append(
        f"- Afterwards {drained:.0f} s waiting for the queue to drain (until no run is left, or "
        "nothing is left to hand out and the runs left showed no sign of life for the heartbeat "
        "timeout plus 120 s; at most --drain-timeout)."
    )
    return "\n".join(lines)


def faces(requests: list[dict[str, Any]], alone: dict[str, list[float]], seconds: float) -> str:
    by_face: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in requests:
        by_face[request["name"]].append(request)
    rows = []
    for face in sorted(by_face, key=lambda f: (f not in SEARCHES, f)):
        answered = [r["ms"] for r in by_face[face] if not failed(r)]
        errors = sum(1 for r in by_face[face] if failed(r))
        solo = alone.get(face, [])
        p95 = percentile(answered, 0.95)
        rows.append(
            [
                face,
                len(by_face[face]),
                f"{len(by_face[face]) / seconds:.2f}",
                f"{percentile(answered, 0.5):.0f}",
                f"{p95:.0f}",
                f"{percentile(answered, 0.99):.0f}",
                f"{max(answered, default=float('nan')):.0f}",
                errors,
                f"{percentile(solo, 0.5):.0f}" if solo else "",
                f"{percentile(solo, 0.95):.0f}" if solo else "",
                f"{p95 / percentile(solo, 0.95):.1f}×" if solo else "",
            ]
        )
    headers = [
        "face", "requests", "per s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors",
        "alone p50", "alone p95", "p95 load / alone",
    ]  # fmt: skip
    return (
        "## Per face\n\nLatency of the answered requests (errors excluded), over the whole run; "
        '"alone": the same face with one client, one request at a time, before the load.\n\n'
        + table(headers, rows)
    )


def errors(requests: list[dict[str, Any]], faults: list[dict[str, Any]], grace: float) -> str:
    counts: Counter[tuple[str, str, str]] = Counter()
    for request in requests:
        if failed(request):
            counts[(request["name"], kind(request), cause(request, faults, grace))] += 1
    if not counts:
        return "## Errors\n\nNone."
    rows = [[face, what, why, n] for (face, what, why), n in sorted(counts.items())]
    return (
        f"## Errors\n\nEach failed request by face and kind, and the fault whose window (the "
        f"fault's length plus {grace:g} s) it overlaps.\n\n"
        + table(["face", "kind", "window", "count"], rows)
    )


def timeline(requests: list[dict[str, Any]], seconds: float) -> str:
    width = seconds / 10
    rows = []
    for window in range(10):
        inside = [r for r in requests if window * width <= r["at"] < (window + 1) * width]
        searches = [r["ms"] for r in inside if r["name"] in SEARCHES and not failed(r)]
        rows.append(
            [
                f"{window * width:.0f}–{(window + 1) * width:.0f} s",
                f"{len(inside) / width:.1f}",
                sum(1 for r in inside if failed(r)),
                f"{percentile(searches, 0.5):.0f}",
                f"{percentile(searches, 0.95):.0f}",
                sum(1 for r in inside if r["name"] == "upload" and not failed(r)),
            ]
        )
    headers = ["window", "requests/s", "errors", "search p50 ms", "search p95 ms", "uploads"]
    return "## Over time\n\n" + table(headers, rows)


def memory_tables(samples: list[dict[str, Any]], seconds: float, logs: Path) -> str:
    """The groups' memory per window, and each process's first window after warm-up
    against its last."""
    width = seconds / 10
    windows: list[dict[str, list[float]]] = [defaultdict(list) for _ in range(10)]
    for sample in samples:
        window = min(9, int(sample["t"] // width))
        for label, size in sample["bytes"].items():
            windows[window][label].append(size / MB)
    groups = [
        "gunicorn",
        "gunicorn child",
        "qcluster",
        "qcluster child",
        "postgres",
        "llm",
        "locust",
    ]
    rows = []
    for number, window in enumerate(windows):
        row = [f"{number * width:.0f}–{(number + 1) * width:.0f} s"]
        for group in groups:
            total = sum(statistics.median(v) for k, v in window.items() if group_of(k) == group)
            row.append(f"{total:.0f}" if total else "")
        rows.append(row)
    flat_rows = []
    roles = cluster_roles(logs / "qcluster.log")
    for label in sorted({k for window in windows for k in window}):
        present = [(n, statistics.median(w[label])) for n, w in enumerate(windows) if label in w]
        if len(present) < 3:
            flat_rows.append([shown(label, roles), "", "", "", "too few windows to tell"])
            continue
        (first_n, first), (last_n, last) = present[1], present[-1]
        change = last - first
        flat = abs(change) <= max(FLAT_MB, FLAT_SHARE * first)
        flat_rows.append(
            [
                shown(label, roles),
                f"{first:.0f} (window {first_n + 1})",
                f"{last:.0f} (window {last_n + 1})",
                f"{change:+.0f}",
                "flat" if flat else ("grew" if change > 0 else "shrank"),
            ]
        )
    return (
        "## Memory\n\nMB, the median of the 10 s samples in each tenth of the run (RSS, summed "
        "over a group; PostgreSQL: PSS summed over the postmaster and its children).\n\n"
        + table(["window", *(COLUMNS.get(g, GROUPS[g]) for g in groups)], rows)
        + f"\n\nEach process: its second window (the first after its warm-up) against its last; "
        f"flat if within {FLAT_SHARE:.0%} or {FLAT_MB:g} MB.\n\n"
        + table(["process", "after warm-up", "last", "change", "verdict"], flat_rows)
    )


def group_of(label: str) -> str:
    return label.rpartition(" ")[0]


#: How each group of processes is named in the report.
GROUPS = {
    "gunicorn": "web master", "gunicorn child": "web worker", "qcluster": "qcluster main",
    "qcluster child": "qcluster process", "postgres": "PostgreSQL (PSS)", "llm": "LLM server",
    "locust": "Locust",
}  # fmt: skip
COLUMNS = {"gunicorn child": "web workers", "qcluster child": "qcluster others"}


def shown(label: str, roles: dict[str, str]) -> str:
    """A process's name in the report: its group's, or its role in the cluster, and pid."""
    group, _, pid = label.rpartition(" ")
    name = roles.get(pid, "") if group == "qcluster child" else ""
    return f"{'qcluster ' + name if name else GROUPS[group]} {pid}"


def cluster_roles(log: Path) -> dict[str, str]:
    """Each django-q2 process's role by pid, as the cluster's log announces them."""
    patterns = {
        "worker": r"ready for work at (\d+)",
        "monitor": r"monitoring at (\d+)",
        "pusher": r"pushing tasks at (\d+)",
        "sentinel": r"^\S+ \S+ (\d+) INFO django-q: Process-\w+ guarding cluster",
    }
    text = log.read_text(errors="replace") if log.exists() else ""
    return {
        pid: role
        for role, pattern in patterns.items()
        for pid in re.findall(pattern, text, re.MULTILINE)
    }


def upload_checks(
    checks: dict[str, Any], t0: float, faults: list[dict[str, Any]], grace: float
) -> str:
    uploads = checks["uploads"]
    accepted = [u for u in uploads if u["status"] in (201, 202)]
    good = [u for u in accepted if u["document_status"] == "indexed" and u["chunks"] > 0]
    lost = [u for u in accepted if u not in good]
    refused = [u for u in uploads if u["status"] not in (201, 202, None)]
    unanswered = [u for u in uploads if u["status"] is None]
    lines = [
        "## After the run",
        "",
        f"- Uploads sent: {len(uploads)}; accepted (201/202): {len(accepted)}; present once, "
        f"indexed, with chunks: {len(good)}; **lost or not indexed: {len(lost)}**.",
        f"- Duplicated documents (same collection and external id): "
        f"{checks['duplicate_documents']}; duplicated chunks (same document and index): "
        f"{checks['duplicate_chunks']}. Documents in the collection: {checks['documents_total']}.",
        f"- Index outbox (IndexOperation rows): {checks['outbox']}.",
        f"- `retrieval_sync_index --check`: exit {checks['sync_exit']}: "
        f"{checks['sync_output'] or '(no output)'}",
        f"- Index runs by status: {checks['runs']}.",
    ]
    for upload in lost:
        lines.append(
            f"  - accepted but {upload['document_status'] or 'absent'} "
            f"({upload['chunks']} chunks): {upload['external_id']} {upload['document_error']}"
        )
    for upload in refused:
        where = f"present, {upload['document_status']}" if upload["present"] else "absent"
        text = " ".join(re.sub(r"<[^>]+>", " ", upload["error"]).split())  # an HTML page's
        lines.append(
            f"- Upload answered {upload['status']}: {upload['external_id']}: {where}. {text[:200]}"
        )
    for upload in unanswered:
        where = f"present, {upload['document_status']}" if upload["present"] else "absent"
        lines.append(f"- Upload sent, never answered: {upload['external_id']}: {where}.")
    for run in checks["runs_left"]:
        beat = run["heartbeat"] - t0
        during = next(
            (f["label"] for f in faults if f["start"] - 1 <= beat <= f["end"] + grace), ""
        )
        lines.append(
            f"- Run #{run['id']} {run['status']}: {run['task']} of {run['document'] or '?'}; "
            f"last sign of life at {beat:.1f} s{f' ({during})' if during else ''}. "
            f"{run['message'][:300]}"
        )
    for row in checks["queue_held"]:
        lines.append(
            f"- Queue row {row['id']} ({row['name']}, the run {row['run']}) locked for "
            f"{row['locked_for_s']} s more."
        )
    for failure in checks["task_failures"]:
        lines.append(f"- django-q2 task failed: {failure['name']}: {failure['result']}")
    return "\n".join(lines)


def log_lines(logs: Path) -> str:
    """The servers' errors: each traceback's exception and each ERROR line, counted."""
    parts = ["## What the logs say", ""]
    for name in ("gunicorn", "qcluster", "locust"):
        path = logs / f"{name}.log"
        counts = Counter(error_lines(path.read_text(errors="replace"))) if path.exists() else {}
        parts.append(f"`{name}.log`: {sum(counts.values())} error lines.")
        parts += [f"    {n} × {line[:300]}" for line, n in counts.most_common(12)]
        parts.append("")
    return "\n".join(parts).rstrip()


def error_lines(text: str) -> list[str]:
    """The last exception of each traceback (chained ones count once) and each logged
    ERROR or CRITICAL, numbers masked."""
    found = []
    state = "log"  # or "frames", "message" (the exception's lines), "after" (a blank line)
    last = ""  # an exception line, kept until we know no chained traceback follows
    for line in text.splitlines():
        if state == "message" and LOG_RECORD.match(line):
            state = "after"  # the log's next record: the message ended
        if line.startswith("Traceback (most recent call last)"):
            state = "frames"
        elif state == "frames":
            if not line.startswith((" ", "\t")):
                state, last = "message", line.strip()
        elif state == "message":
            if not line.strip():
                state = "after"
        elif line.startswith(("During handling", "The above exception")):
            state, last = "log", ""  # the next traceback's exception stands for this one
        elif line.strip():
            state = "log"
            if last:
                found.append(last)
                last = ""
            if re.search(r"\b(ERROR|CRITICAL)\b", line):
                found.append(re.sub(r"^\S+ \S+ \d+ ", "", line.strip()))
    if last:
        found.append(last)
    return [re.sub(r"\d+", "N", line) for line in found]


if __name__ == "__main__":  # python bench/load_report.py LOGS: the report of that run again
    print(report(Path(sys.argv[1])))
