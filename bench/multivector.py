"""Several vectors per chunk: does a chunk ranked by more than its one vector rank files better?

    python bench/multivector.py [--set flask,starlette,...]

Issue 35 asks to consider what the peers do not, such as several vectors per chunk or per
section (title vs body). On each real-documents set (``realdocs.py``), the chunks of the
app's default collection (indexed by ``realdocs.py`` with the defaults, or here if it is
missing) are embedded three more ways beside the vector the app stores (its header and
text): the text alone (``body``), the header alone (``head``: title, opening sentence,
heading path, file path) and the section's title path alone (``section``). Each question
then ranks every chunk by one vector or by a combination of a chunk's vectors (the best
of two, or a weighted sum of cosines), exactly (numpy, no index), and the chunk ranking
is collapsed to files and scored as ``realdocs.py`` scores it. The ``full`` row is the
app's dense leg with an exact scan. Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import numpy as np
from common import table
from realdocs import (
    DEPTH,
    DocSet,
    default_collection,
    file_ranking,
    hits_and_mrr,
    start_on_sets,
)

#: How a chunk's score is made from its cosines to the question (``full``: the stored vector).
COMBINATIONS = {
    "full (the app's dense leg)": lambda s: s["full"],
    "body": lambda s: s["body"],
    "head": lambda s: s["head"],
    "section": lambda s: s["section"],
    "max(full, head)": lambda s: np.maximum(s["full"], s["head"]),
    "max(full, body)": lambda s: np.maximum(s["full"], s["body"]),
    "max(full, section)": lambda s: np.maximum(s["full"], s["section"]),
    "full + 0.3 head": lambda s: s["full"] + 0.3 * s["head"],
    "full + 0.5 head": lambda s: s["full"] + 0.5 * s["head"],
    "full + 0.3 section": lambda s: s["full"] + 0.3 * s["section"],
    "full + 0.5 body": lambda s: s["full"] + 0.5 * s["body"],
    "full + body + head": lambda s: s["full"] + s["body"] + s["head"],
    "full + 0.3 body + 0.3 section": lambda s: s["full"] + 0.3 * s["body"] + 0.3 * s["section"],
}


def main() -> None:
    names = start_on_sets(__doc__)
    scores = {name: set_scores(name) for name in names}
    for name in names:
        print(f"\n## {name}\n")
        rows = [[label, f"{hits} / {mrr:.3f}"] for label, (hits, mrr) in scores[name].items()]
        print(table(["chunk score", "dense hit@5 / MRR@10"], rows), flush=True)
    if len(names) > 1:
        print(f"\n## mean over {', '.join(names)} (hit@5 as % of questions)\n")
        rows = []
        for label in COMBINATIONS:
            shares = [scores[n][label][0] / len(DocSet(n).load_questions()) for n in names]
            mrrs = [scores[n][label][1] for n in names]
            rows.append(
                [label, f"{100 * np.mean(shares):.1f}% / {np.mean(mrrs):.3f}"]
                + [f"{m:.3f}" for m in mrrs]
            )
        print(table(["chunk score", "dense hit@5 / MRR@10", *names], rows))


def set_scores(name: str) -> dict[str, tuple[int, float]]:
    """Each combination's hit@5 and MRR@10 on one set."""
    from cached_embedder import CachedLocalEmbedder

    from retrieval.models import Chunk

    docset = DocSet(name)
    docs = docset.documents_folder()
    questions = docset.load_questions()
    collection = default_collection(docset, docs)
    rows = list(
        Chunk.objects.filter(collection=collection).values_list(
            "embedding",
            "document__external_id",
            "document__title",
            "heading_path",
            "indexed_prefix",
            "content",
        )
    )
    stored, chunks = [row[0] for row in rows], [row[1:] for row in rows]
    embedder = CachedLocalEmbedder()
    texts = {
        "body": [content for *_, content in chunks],
        "head": [prefix or content for *_, prefix, content in chunks],
        "section": [
            " > ".join([title or "", *headings]) or content
            for _, title, headings, _, content in chunks
        ],
    }
    queries = unit(embedder.embed_queries([q["question"] for q in questions]))
    cosines = {kind: queries @ unit(embedder.embed_batch(t)).T for kind, t in texts.items()}
    # The app's own vector of each chunk (its header and text), as stored.
    cosines["full"] = queries @ unit(np.array(stored, dtype=np.float32)).T
    ids = [external_id for external_id, *_ in chunks]
    results = {}
    for label, combine in COMBINATIONS.items():
        scores = combine(cosines)
        rankings = [
            file_ranking((ids[i] for i in np.argsort(-row, kind="stable")[:DEPTH]), docs)
            for row in scores
        ]
        results[label] = hits_and_mrr(rankings, questions)
    return results


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


if __name__ == "__main__":
    main()
