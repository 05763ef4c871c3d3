"""Dense pseudo-relevance feedback: does moving the question's vector toward its first
chunks' (Rocchio) rank files better?

    python bench/dense_feedback.py [--set flask,starlette,...]

Issue 35's one question no default finds in the top 5 (flask q05, behind nginx) shares no
word with its answer, so term feedback (RM3, ``realdocs.py --rewriters``) was tried first;
this is the same idea in the embedding space. On each real-documents set the chunks of the
app's default collection (indexed by ``realdocs.py`` with the defaults, or here if missing)
are ranked exactly (numpy) by the question's vector ``q``, and again by
``q + beta * mean(top k chunk vectors)`` (normalised), collapsed to files and scored as
``realdocs.py`` scores them. The ``none`` row is the app's dense leg with an exact scan.
Figures are printed; nothing is asserted.
"""

from __future__ import annotations

import numpy as np
from common import table
from realdocs import DEPTH, DocSet, default_collection, file_ranking, hits_and_mrr, start_on_sets

#: (feedback chunks k, weight beta); (0, 0) is no feedback.
FEEDBACK = [(0, 0.0)] + [(k, beta) for k in (3, 5, 10) for beta in (0.25, 0.5, 1.0)]


def main() -> None:
    names = start_on_sets(__doc__)
    from cached_embedder import CachedLocalEmbedder

    from retrieval.models import Chunk

    embedder = CachedLocalEmbedder()
    rows: dict[str, list[tuple[int, int, float]]] = {}
    for name in names:
        docset = DocSet(name)
        docs = docset.documents_folder()
        collection = default_collection(docset, docs)
        chunks = Chunk.objects.filter(collection=collection, embedding__isnull=False)
        ids, vectors = zip(*chunks.values_list("document__external_id", "embedding"), strict=True)
        matrix = np.stack([np.asarray(v, dtype=np.float32) for v in vectors])
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        questions = docset.load_questions()
        asked = embedder.embed_queries([q["question"] for q in questions])
        asked /= np.linalg.norm(asked, axis=1, keepdims=True)
        for k, beta in FEEDBACK:
            rankings = []
            for vector in asked:
                if k:
                    first = np.argsort(-(matrix @ vector))[:k]
                    vector = vector + beta * matrix[first].mean(axis=0)
                    vector /= np.linalg.norm(vector)
                order = np.argsort(-(matrix @ vector))[:DEPTH]
                rankings.append(file_ranking((ids[i] for i in order), docs))
            hits, mrr = hits_and_mrr(rankings, questions)
            rows.setdefault(label(k, beta), []).append((hits, len(questions), mrr))
    print(f"## dense feedback over {', '.join(names)} (hit@5 as % of questions in the mean)\n")
    header = ["feedback", "mean hit@5 / MRR@10", *names]
    body = []
    for feedback, cells in rows.items():
        hit = sum(100 * h / n for h, n, _ in cells) / len(cells)
        mrr = sum(m for *_, m in cells) / len(cells)
        body.append([feedback, f"{hit:.1f}% / {mrr:.3f}", *(f"{h} / {m:.3f}" for h, _, m in cells)])
    print(table(header, body))


def label(k: int, beta: float) -> str:
    return f"top {k}, beta {beta}" if k else "none (the app's dense leg)"


if __name__ == "__main__":
    main()
