"""Steps of the replica test, run in a child process on the primary + replica settings.

``python -m tests.replica.scenario ingest|wait LSN|search|facade|write`` prints one JSON
object.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "tests.replica.settings"

import django  # noqa: E402

django.setup()

from django.db import connections  # noqa: E402

from retrieval.models import Collection  # noqa: E402
from retrieval.services.core.databases import read_primary, search_database  # noqa: E402
from retrieval.services.registry import retrievers  # noqa: E402

TEXTS = {
    "n": "The north wind blows over the hills.",
    "e": "East of the river the market opens at dawn.",
    "u": "Up in the hills the north road climbs east.",
}
QUERIES = ("north hills", "river market", "road climbs east")


def searches() -> dict:
    """Every retriever's answers, read through the search alias."""
    collection = Collection.objects.using("replica").get(name="replicated")

    def ids(name: str, query: str) -> list[str]:
        found = retrievers[name].retrieve(query, collection=collection)
        return [r.chunk.document.external_id for r in found]

    return {name: {q: ids(name, q) for q in QUERIES} for name in ("bm25", "dense", "hybrid")}


def facade_searches() -> dict:
    """Every retriever's answers through ``search()``, and why it read the primary, if so."""
    from retrieval.services.access import Scope
    from retrieval.services.query.search import search

    answers, fallbacks = {}, set()
    for name in ("bm25", "dense", "hybrid"):
        answers[name] = {}
        for query in QUERIES:
            found = search(query, collection="replicated", retriever=name, scope=Scope.ALL)
            answers[name][query] = [r.chunk.document.external_id for r in found]
            events = found.trace["events"]
            fallbacks.update(e["reason"] for e in events if e["stage"] == "read_primary")
    return {"results": answers, "read_primary": sorted(fallbacks)}


def replay_lsn(alias: str) -> str:
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_last_wal_replay_lsn()::text")
        return cursor.fetchone()[0]


def main(step: str) -> dict:
    if step == "ingest":
        from retrieval.services.ingestion.collections import get_or_create_collection
        from retrieval.services.ingestion.ingest import Source, ingest

        collection, _ = get_or_create_collection("replicated")
        run = ingest(collection, [Source.from_text(t, external_id=k) for k, t in TEXTS.items()])
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()::text")
            written = cursor.fetchone()[0]
        with read_primary():
            primary = search_database()
        alias = search_database()
        return {"status": run.status, "lsn": written, "alias": alias, "primary": primary}
    if step == "wait":  # until the replica has replayed the primary's WAL up to LSN
        target = sys.argv[2]
        for _ in range(600):
            with connections["replica"].cursor() as cursor:
                cursor.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target])
                if cursor.fetchone()[0]:
                    return {"replayed": replay_lsn("replica")}
            time.sleep(0.05)
        return {"replayed": None}
    if step == "search":
        return {"results": searches(), "alias": search_database()}
    if step == "facade":
        return facade_searches()
    if step == "write":
        try:
            Collection.objects.using("replica").create(name="nope", slug="nope")
        except Exception as e:  # noqa: BLE001 - the refusal is the answer
            return {"refused": f"{type(e).__name__}: {e}"}
        return {"refused": None}
    raise SystemExit(f"unknown step {step!r}")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
