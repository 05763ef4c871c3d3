"""The default search's latency on real documents: p50/p95 per set, and the rankings it gave.

    python bench/search_path.py [--set flask,starlette,...] [--passes 3] [--top-k 10]
                                [--save FILE] [--compare FILE]

Each set's default collection (indexed by ``realdocs.py``'s defaults, or here if it is
missing) answers its questions through ``retrieval.search`` with no retriever named: the
collection's default pipeline, a hybrid of BM25 and dense. One warm-up pass, then
``--passes`` timed passes over the questions; p50/p95 are over every timed search. A
direct call of the hybrid retriever (``retrievers["hybrid"].retrieve``, no pipeline)
takes turns with it on each question, as the in-process reference.

Written for issue 61's "one fuser path": ``--save`` keeps each question's top ``--top-k``
(chunk id and score); ``--compare`` reads such a file, written by another version of the
code on the same database, and prints how many rankings differ. Run the older code's
checkout and this one's in turns to take the machine's drift out of a before/after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from common import machine, setup_django, table
from realdocs import SET_NAMES, DocSet, app_settings, default_collection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", default=",".join(SET_NAMES), help="Sets, comma-separated.")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--save", type=Path, help="Write each question's ranking here.")
    parser.add_argument("--compare", type=Path, help="Count rankings that differ from these.")
    args = parser.parse_args()
    setup_django()
    print(f"Machine: {machine()}\n")
    rows, rankings = [], {}
    for name in args.set.split(","):
        row, rankings[name] = measure(name, passes=args.passes, top_k=args.top_k)
        rows.append(row)
    print(table(["set", "searches", "search p50", "search p95", "hybrid p50", "ratio p50"], rows))
    if args.save:
        args.save.write_text(json.dumps(rankings))
    if args.compare:
        compare(rankings, json.loads(args.compare.read_text()))


def measure(name: str, *, passes: int, top_k: int) -> tuple[list[object], list]:
    """Time the default search and the hybrid retriever on one set's questions."""
    from django.test.utils import override_settings

    from retrieval import search
    from retrieval.services.access import Scope
    from retrieval.services.registry import retrievers

    docset = DocSet(name)
    collection = default_collection(docset, docset.documents_folder())
    questions = [q["question"] for q in docset.load_questions()]
    searched, direct = [], []
    with override_settings(RETRIEVAL=app_settings("default")):
        hybrid = retrievers["hybrid"]
        for number in range(passes + 1):
            for question in questions:
                started = time.perf_counter()
                search(question, collection=collection, top_k=top_k, scope=Scope.ALL)
                middle = time.perf_counter()
                hybrid.retrieve(question, collection=collection, top_k=top_k, filters=None)
                ended = time.perf_counter()
                if number:  # the first pass warms the caches up
                    searched.append(1000 * (middle - started))
                    direct.append(1000 * (ended - middle))
        ranking = [
            [[r.chunk_id, round(r.score, 6)] for r in search(q, collection=collection,
                                                             top_k=top_k, scope=Scope.ALL)]
            for q in questions
        ]  # fmt: skip
    p50, p95 = percentiles(searched)
    reference, _ = percentiles(direct)
    return [name, len(searched), f"{p50:.2f}", f"{p95:.2f}", f"{reference:.2f}",
            f"{p50 / reference:.2f}"], ranking  # fmt: skip


def percentiles(ms: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(ms, n=100)
    return statistics.median(ms), cuts[94]


def compare(rankings: dict[str, list], other: dict[str, list]) -> None:
    """Print, per set, how many questions' rankings differ (ids, or scores beyond 1e-5)."""
    for name, mine in rankings.items():
        theirs = other.get(name, [])
        differ = sum(
            1
            for a, b in zip(mine, theirs, strict=False)
            if [i for i, _ in a] != [i for i, _ in b]
            or any(abs(x - y) > 1e-5 for (_, x), (_, y) in zip(a, b, strict=True))
        )
        print(f"{name}: {differ} of {len(mine)} rankings differ from {len(theirs)} compared")


if __name__ == "__main__":
    main()
