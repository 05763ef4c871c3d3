"""Document-level aggregation: does a file ranked by more than its best chunk rank better?

    python bench/aggregation.py [--set flask,starlette,...]

Issue 35 names document-level aggregation of chunk scores among the causes to measure.
``realdocs.py`` ranks files at their best chunk (MaxP). On each real-documents set, the
app's default collection (indexed by ``realdocs.py``, or here if it is missing) answers
each question by each leg (``DEPTH`` chunks, scores in [0, 1]); the chunks are grouped by
file and each file scored by its best chunk plus a share of its next ones, or by the sum
of its best three, then scored as ``realdocs.py`` scores it. The ``max`` rows are the
app's legs as ``realdocs.py`` reports them. Figures are printed; nothing is asserted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from common import table
from realdocs import (
    DEPTH,
    LEGS,
    DocSet,
    app_settings,
    default_collection,
    file_ranking,
    hits_and_mrr,
    start_on_sets,
)

#: How a file's score is made from its chunks' scores, best first.
AGGREGATIONS: dict[str, Callable[[list[float]], float]] = {
    "max (the app's ranking)": lambda s: s[0],
    "max + 0.1 second": lambda s: s[0] + 0.1 * sum(s[1:2]),
    "max + 0.25 second": lambda s: s[0] + 0.25 * sum(s[1:2]),
    "max + 0.1 next three": lambda s: s[0] + 0.1 * sum(s[1:4]),
    "sum of best three": lambda s: sum(s[:3]),
}

Scores = dict[str, dict[str, tuple[int, float]]]  # aggregation -> leg -> (hit@5, MRR@10)


def main() -> None:
    names = start_on_sets(__doc__)
    headers = ["file score", *(f"{leg} hit@5 / MRR@10" for leg in LEGS)]
    scores = {name: set_scores(name) for name in names}
    for name in names:
        print(f"\n## {name}\n")
        rows = [
            [label, *(f"{hits} / {mrr:.3f}" for hits, mrr in legs.values())]
            for label, legs in scores[name].items()
        ]
        print(table(headers, rows), flush=True)
    if len(names) > 1:
        print(f"\n## mean over {', '.join(names)} (hit@5 as % of questions)\n")
        sizes = {name: len(DocSet(name).load_questions()) for name in names}
        rows = []
        for label in AGGREGATIONS:
            cells = []
            for leg in LEGS:
                share = np.mean([scores[n][label][leg][0] / sizes[n] for n in names])
                mrr = np.mean([scores[n][label][leg][1] for n in names])
                cells.append(f"{100 * share:.1f}% / {mrr:.3f}")
            rows.append([label, *cells])
        print(table(headers, rows))


def set_scores(name: str) -> Scores:
    """Each aggregation's hit@5 and MRR@10 per leg on one set."""
    from django.test.utils import override_settings

    from retrieval.services.access import Scope
    from retrieval.services.query.search import search

    docset = DocSet(name)
    docs = docset.documents_folder()
    questions = docset.load_questions()
    collection = default_collection(docset, docs)
    scores: Scores = {label: {} for label in AGGREGATIONS}
    with override_settings(RETRIEVAL=app_settings("default")):
        for leg in LEGS:
            answers = [
                search(q["question"], collection=collection, retriever=leg, top_k=DEPTH,
                       scope=Scope.ALL)
                for q in questions
            ]  # fmt: skip
            by_file = [file_scores((r.chunk.document.external_id, r.score) for r in answer)
                       for answer in answers]  # fmt: skip
            for label, aggregate in AGGREGATIONS.items():
                rankings = [
                    file_ranking(sorted(files, key=lambda f: -aggregate(files[f])), docs)
                    for files in by_file
                ]
                scores[label][leg] = hits_and_mrr(rankings, questions)
    return scores


def file_scores(results: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    """Group ``(external id, score)`` pairs by document, each document's scores best first."""
    files: dict[str, list[float]] = {}
    for external_id, score in results:
        files.setdefault(external_id, []).append(score)
    return {f: sorted(s, reverse=True) for f, s in files.items()}


if __name__ == "__main__":
    main()
