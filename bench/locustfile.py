"""The users of ``bench/load.py``'s run (Locust, headless, started by it).

API readers search through ``POST /api/search/`` by each face of ``load.FACES``; page
readers through the HTML search page; editors upload Markdown notes, ask reindexes and
follow their runs. Each signs in through the login form (session and CSRF token), as a
browser would. Every request is written to ``LOAD_REQUESTS`` (one JSON line: start time,
name, status, milliseconds, error), and every upload to ``LOAD_JOURNAL`` before it is sent
and when it is answered. ``LOAD_READERS``, ``LOAD_PAGE_READERS`` and ``LOAD_EDITORS`` say
how many users of each kind run.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from typing import Any

from load import COLLECTION, FACES, PAGE, PASSWORD, QUERIES, answer_problem, note_text
from locust import HttpUser, between, events, task

REQUESTS = open(os.environ["LOAD_REQUESTS"], "a")  # noqa: SIM115 (open for the whole run)
JOURNAL = open(os.environ["LOAD_JOURNAL"], "a")  # noqa: SIM115
RUN = os.environ.get("LOAD_RUN_ID", "dev")


def write(file: Any, record: dict[str, Any]) -> None:
    """Append a JSON line (gevent switches on I/O only, so lines never interleave)."""
    file.write(json.dumps(record) + "\n")
    file.flush()


@events.request.add_listener
def record(
    name: str,
    response_time: float,
    response: Any = None,
    exception: BaseException | None = None,
    start_time: float | None = None,
    **kwargs: Any,
) -> None:
    error = f"{type(exception).__name__}: {str(exception)[:300]}" if exception else ""
    write(
        REQUESTS,
        {
            "t": start_time,
            "name": name,
            "status": getattr(response, "status_code", 0) or 0,
            "ms": response_time,
            "error": error,
        },
    )


class SignedIn(HttpUser):
    """A user who signs in through the login form before anything else, and again when
    the site no longer knows the session."""

    abstract = True
    username = ""

    def on_start(self) -> None:
        self.signed_in = False

    def sign_in(self) -> bool:
        self.client.get("/accounts/login/", name="login page")
        token = self.client.cookies.get("csrftoken", "")
        reply = self.client.post(
            "/accounts/login/",
            data={"username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": token},
            allow_redirects=False,
            name="login",
        )
        self.signed_in = reply.status_code == 302
        return self.signed_in

    def ready(self) -> bool:
        return self.signed_in or self.sign_in()

    def headers(self) -> dict[str, str]:
        return {"X-CSRFToken": self.client.cookies.get("csrftoken", "")}

    def forgotten(self, status: int) -> None:
        if status in (401, 403):
            self.signed_in = False


class ApiReader(SignedIn):
    username = "reader"
    wait_time = between(0.5, 1.5)
    fixed_count = int(os.environ.get("LOAD_READERS", "1"))

    @task(2)
    def hybrid(self) -> None:
        self.search("api hybrid")

    @task
    def bm25(self) -> None:
        self.search("api bm25")

    @task
    def dense(self) -> None:
        self.search("api dense")

    @task
    def llm(self) -> None:
        self.search("api llm")

    def search(self, face: str) -> None:
        if not self.ready():
            return
        body = {"collection": COLLECTION, "query": random.choice(QUERIES), "top_k": 10}
        with self.client.post(
            "/api/search/",
            json={**body, **FACES[face]},
            headers=self.headers(),
            name=face,
            catch_response=True,
        ) as reply:
            self.forgotten(reply.status_code)
            if reply.status_code == 200:
                problem = answer_problem(face, reply.json())
                if problem:
                    reply.failure(problem)


class PageReader(SignedIn):
    username = "reader"
    wait_time = between(0.5, 1.5)
    fixed_count = int(os.environ.get("LOAD_PAGE_READERS", "1"))

    @task
    def search(self) -> None:
        if not self.ready():
            return
        params = {"q": random.choice(QUERIES), "collection": COLLECTION}
        with self.client.get("/", params=params, name=PAGE, catch_response=True) as reply:
            if reply.status_code == 200 and "/accounts/login/" in reply.url:
                self.signed_in = False
                reply.failure("sent to the login page")


class Editor(SignedIn):
    username = "editor"
    wait_time = between(2, 5)
    fixed_count = int(os.environ.get("LOAD_EDITORS", "1"))
    numbers = itertools.count(1)  # shared by the editors: one Locust process

    def on_start(self) -> None:
        super().on_start()
        self.documents: list[int] = []
        self.runs: list[int] = []

    @task(4)
    def upload(self) -> None:
        if not self.ready():
            return
        number = next(self.numbers)
        external_id = f"load/{RUN}/{number:05d}.md"
        write(JOURNAL, {"event": "sent", "external_id": external_id, "t": time.time()})
        with self.client.post(
            "/api/documents/",
            data={"collection": COLLECTION, "external_id": external_id},
            files={"file": (f"{number:05d}.md", note_text(number), "text/markdown")},
            headers=self.headers(),
            name="upload",
            catch_response=True,
        ) as reply:
            self.forgotten(reply.status_code)
            body = reply.json() if reply.status_code in (201, 202) else {}
            if body:
                self.documents.append(body["id"])
                self.runs.append(body["index_run"])
            write(
                JOURNAL,
                {
                    "event": "answered",
                    "external_id": external_id,
                    "t": time.time(),
                    "status": reply.status_code,
                    "error": "" if body else f"{reply.error or ''} {(reply.text or '')[:300]}",
                },
            )

    @task
    def reindex(self) -> None:
        if not self.documents or not self.ready():
            return
        document = random.choice(self.documents)
        with self.client.post(
            f"/api/documents/{document}/reindex/",
            headers=self.headers(),
            name="reindex",
            catch_response=True,
        ) as reply:
            self.forgotten(reply.status_code)
            if reply.status_code in (200, 202):
                self.runs.append(reply.json()["id"])

    @task(2)
    def follow(self) -> None:
        if not self.runs or not self.ready():
            return
        self.client.get(f"/api/index-runs/{self.runs[-1]}/", name="run status")
