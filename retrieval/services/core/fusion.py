"""Fusing ranked lists: reciprocal rank, relative score and distribution-based score fusion.

Each fusion function takes ranked lists (one per retriever) of :class:`ScoredChunk` or
:class:`RetrievalResult` — anything with ``chunk_id`` and ``score`` — deduplicates
by chunk, and returns :class:`ScoredChunk` records whose metadata keeps every list's
score and rank (``metadata["legs"][name] = {"score": ..., "rank": ...}``, rank 1-based),
best first; among equal scores, the chunk more lists hold comes first. Fused scores lie in
[0, 1]: the weighted sum divided by the most any chunk could get (1.0 for a chunk each
list ranks best; for RRF, ``Σ weight / (k + 1)``), the sum itself kept as
``metadata["raw_score"]`` and the method as ``metadata["retrieval_method"]``. A list may end
with scores its retriever gave another list's candidates (``metadata[SCORED_FOR_FUSION]``,
see :data:`SCORES_EVERY_CANDIDATE`): those keep their score and have no rank. Load the
fused chunks with :func:`retrieval.services.retrievers.base.load_results`. The lists
come from :func:`retrieval.services.core.legs.run_legs`.

With a ``document_floor`` (and ``documents``, each chunk's document), each document's leading
candidate gets from each list at least that share of the best the list gave a chunk of the
document: a page whose best BM25 chunk and best dense chunk differ is not ranked below pages
that only one list found, and its other chunks keep their own scores. A leader so lifted
keeps its own sum as ``metadata["own_score"]`` (``bench/realdocs.py``: the configured
default, 0.8).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from retrieval.services.types import ScoredChunk


class Scored(Protocol):
    """Anything ranked: a chunk id and a score."""

    @property
    def chunk_id(self) -> int: ...

    @property
    def score(self) -> float: ...


RankedLists = Sequence[Sequence[Scored]]

#: The metadata key marking a score a retriever gave a chunk it did not rank itself.
SCORED_FOR_FUSION = "scored_for_fusion"


def rrf_fuse(
    ranked_lists: RankedLists,
    weights: Sequence[float] | None = None,
    k: int = 60,
    top_k: int | None = 10,
    *,
    names: Sequence[str] | None = None,
    documents: Mapping[int, int] | None = None,
    document_floor: float = 0.0,
) -> list[ScoredChunk]:
    """Weighted reciprocal-rank fusion: ``Σ weight / (k + rank)``, rank from 1, normalised
    by its most, ``Σ weight / (k + 1)``; ``top_k=None`` keeps every chunk."""
    if k < 0:
        raise ValueError(f"k must be >= 0, not {k!r}.")
    return _fuse(
        "rrf",
        ranked_lists,
        weights,
        top_k,
        names,
        lambda results: [1.0 / (k + r) for r in range(1, len(results) + 1)],
        most=1.0 / (k + 1) if k + 1 > 0 else 1.0,
        documents=documents,
        document_floor=document_floor,
    )


def relative_score_fuse(
    ranked_lists: RankedLists,
    weights: Sequence[float] | None = None,
    top_k: int | None = 10,
    *,
    names: Sequence[str] | None = None,
    documents: Mapping[int, int] | None = None,
    document_floor: float = 0.0,
) -> list[ScoredChunk]:
    """Relative-score fusion: each list's scores min-max normalised to [0, 1], weighted sum."""
    return _fuse(
        "relative_score",
        ranked_lists,
        weights,
        top_k,
        names,
        _min_max,
        documents=documents,
        document_floor=document_floor,
    )


def relative_to_best_fuse(
    ranked_lists: RankedLists,
    weights: Sequence[float] | None = None,
    top_k: int | None = 10,
    *,
    names: Sequence[str] | None = None,
    documents: Mapping[int, int] | None = None,
    document_floor: float = 0.0,
) -> list[ScoredChunk]:
    """Each list's scores divided by its best (a floor of 0), weighted sum.

    A list whose best score is not positive adds nothing. Fused with every candidate
    scored by every leg (:data:`SCORES_EVERY_CANDIDATE`), a chunk's fused score no longer
    depends on how deep each leg's list went.
    """
    return _fuse(
        "relative_to_best",
        ranked_lists,
        weights,
        top_k,
        names,
        _ratio_to_best,
        documents=documents,
        document_floor=document_floor,
    )


def dbsf_fuse(
    ranked_lists: RankedLists,
    weights: Sequence[float] | None = None,
    top_k: int | None = 10,
    *,
    names: Sequence[str] | None = None,
    documents: Mapping[int, int] | None = None,
    document_floor: float = 0.0,
) -> list[ScoredChunk]:
    """Distribution-based score fusion: scores scaled by each list's mean ± 3 σ, weighted sum."""
    return _fuse(
        "dbsf",
        ranked_lists,
        weights,
        top_k,
        names,
        _three_sigma,
        documents=documents,
        document_floor=document_floor,
    )


def _min_max(results: Sequence[Scored]) -> list[float]:
    scores = [r.score for r in results]
    low, high = min(scores, default=0.0), max(scores, default=0.0)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def _ratio_to_best(results: Sequence[Scored]) -> list[float]:
    best = max((r.score for r in results), default=0.0)
    return [max(0.0, r.score / best) if best > 0 else 0.0 for r in results]


def _three_sigma(results: Sequence[Scored]) -> list[float]:
    scores = [r.score for r in results]
    if len(scores) < 2:
        return [1.0] * len(scores)
    mean, sigma = statistics.fmean(scores), statistics.pstdev(scores)
    if sigma == 0:
        return [1.0] * len(scores)
    low, high = mean - 3 * sigma, mean + 3 * sigma
    return [min(1.0, max(0.0, (s - low) / (high - low))) for s in scores]


def _fuse(
    method: str,
    ranked_lists: RankedLists,
    weights: Sequence[float] | None,
    top_k: int | None,
    names: Sequence[str] | None,
    contribution: Callable[[Sequence[Scored]], list[float]],
    *,
    most: float = 1.0,
    documents: Mapping[int, int] | None = None,
    document_floor: float = 0.0,
) -> list[ScoredChunk]:
    """Fuse; ``most`` is the largest contribution one list gives a chunk."""
    weights = [1.0] * len(ranked_lists) if weights is None else list(weights)
    names = [str(i) for i in range(len(ranked_lists))] if names is None else list(names)
    if not len(weights) == len(names) == len(ranked_lists):
        raise ValueError(
            f"Got {len(ranked_lists)} ranked lists, {len(weights)} weights and {len(names)} names."
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, not {top_k!r}.")
    check_document_floor(document_floor)
    if document_floor and documents is None:
        raise ValueError("A document floor needs each chunk's document (documents=...).")
    contributions: list[tuple[float, dict[int, float]]] = []
    legs: dict[int, dict[str, dict[str, float]]] = {}
    for results, weight, name in zip(ranked_lists, weights, names, strict=True):
        seen: set[int] = set()
        unique = [r for r in results if not (r.chunk_id in seen or seen.add(r.chunk_id))]
        ids = [r.chunk_id for r in unique]
        contributions.append((weight, dict(zip(ids, contribution(unique), strict=True))))
        for rank, result in enumerate(unique, start=1):
            ranked = not getattr(result, "metadata", {}).get(SCORED_FOR_FUSION)
            legs.setdefault(result.chunk_id, {})[name] = (
                {"score": result.score, "rank": rank} if ranked else {"score": result.score}
            )
    fused = dict.fromkeys(legs, 0.0)
    for weight, values in contributions:
        for chunk_id, value in values.items():
            fused[chunk_id] += weight * value
    own = fused
    if document_floor and documents is not None:
        fused = _floored_by_document(fused, contributions, documents, document_floor)
    ceiling = sum(w for w in weights if w > 0) * most
    # Equal scores: the chunk more lists hold first (under min-max, one a list ranks last
    # scores 0 there, as if that list had missed it), then the lower id.
    order = sorted(fused, key=lambda key: (-fused[key], -len(legs[key]), key))[:top_k]
    return [
        ScoredChunk(
            key,
            min(1.0, max(0.0, fused[key] / ceiling)) if ceiling > 0 else 0.0,
            {
                "legs": legs[key],
                "retrieval_method": method,
                "raw_score": fused[key],
                # A document's leader lifted by the floor: its own sum, for explanations.
                **({"own_score": own[key]} if fused[key] != own[key] else {}),
            },
        )
        for key in order
    ]


def _floored_by_document(
    fused: dict[int, float],
    contributions: Sequence[tuple[float, Mapping[int, float]]],
    documents: Mapping[int, int],
    floor: float,
) -> dict[int, float]:
    """The fused sums, but for each document's leading candidate: there, each list
    contributes at least ``floor`` times the best it gave a chunk of the document.

    The leader is the candidate with the highest such sum (on a tie, the one more lists
    hold, then the lowest id); a document's other chunks keep their own sums, so that one
    strong document does not fill the ranking with its chunks.
    """
    floored = dict.fromkeys(fused, 0.0)
    for weight, values in contributions:
        best: dict[int, float] = {}
        for chunk_id, value in values.items():
            document = documents.get(chunk_id)
            if document is not None and value > best.get(document, 0.0):
                best[document] = value
        for chunk_id in floored:
            share = floor * best.get(documents.get(chunk_id, -1), 0.0)
            floored[chunk_id] += weight * max(values.get(chunk_id, 0.0), share)
    # Ties as in the fused order: the chunk more lists hold, then the lower id.
    held = {chunk_id: sum(chunk_id in values for _, values in contributions) for chunk_id in fused}
    leaders: dict[int, int] = {}
    for chunk_id in sorted(floored, key=lambda key: (-floored[key], -held[key], key)):
        document = documents.get(chunk_id)
        if document is not None:
            leaders.setdefault(document, chunk_id)
    lead = set(leaders.values())
    return {chunk_id: floored[chunk_id] if chunk_id in lead else s for chunk_id, s in fused.items()}


def check_document_floor(document_floor: object) -> float:
    """Return a valid document floor (a number from 0 to 1); raise ``ValueError``."""
    if (
        isinstance(document_floor, bool)
        or not isinstance(document_floor, int | float)
        or not 0 <= document_floor <= 1
    ):
        raise ValueError(f"document_floor must be a number from 0 to 1, not {document_floor!r}.")
    return float(document_floor)


FUSION_METHODS = {
    "rrf": rrf_fuse,
    "relative_score": relative_score_fuse,
    "relative_to_best": relative_to_best_fuse,
    "dbsf": dbsf_fuse,
}

#: Methods whose legs first score every other leg's candidates they can
#: (:meth:`retrieval.services.core.legs.LegResults.fuse`), so that no candidate counts as 0
#: in a leg merely because that leg's list stopped above it.
SCORES_EVERY_CANDIDATE = frozenset({"relative_to_best"})


def fusion_defaults(
    method: str | None = None, k: int | None = None, document_floor: float | None = None
) -> tuple[str, int, float]:
    """Return ``(method, k, document_floor)``: the given ones, else ``RETRIEVAL["FUSION"]``'s
    (the one place fusion defaults live, for hybrid retrievers and pipelines alike); a key
    the site's ``FUSION`` leaves out has the app's default."""
    from retrieval.conf import DEFAULTS, retrieval_settings

    configured = {**DEFAULTS["FUSION"], **retrieval_settings.FUSION}
    method = configured["method"] if method is None else method
    k = configured["k"] if k is None else k
    document_floor = configured["document_floor"] if document_floor is None else document_floor
    if method not in FUSION_METHODS:
        raise ValueError(f"Unknown fusion {method!r}; choose one of {', '.join(FUSION_METHODS)}.")
    if isinstance(k, bool) or not isinstance(k, int | float) or k < 0:
        raise ValueError(f"k must be a non-negative number, not {k!r}.")
    return method, k, check_document_floor(document_floor)
