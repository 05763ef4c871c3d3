"""Fusion of ranked lists, with scores worked out by hand."""

from __future__ import annotations

import pytest

from retrieval.models import Chunk
from retrieval.services.core.fusion import (
    SCORED_FOR_FUSION,
    dbsf_fuse,
    relative_score_fuse,
    relative_to_best_fuse,
    rrf_fuse,
)
from retrieval.services.types import RetrievalResult, ScoredChunk


def ranked(*pairs: tuple[int, float]) -> list[ScoredChunk]:
    """A ranking of chunk ids with their scores, best first."""
    return [ScoredChunk(chunk_id, score) for chunk_id, score in pairs]


SPARSE = ranked((1, 9.0), (2, 6.0), (3, 3.0))
DENSE = ranked((3, 0.9), (4, 0.8), (1, 0.5))


def ids(results: list[ScoredChunk]) -> list[int]:
    return [r.chunk_id for r in results]


def sums(results: list[ScoredChunk]) -> dict[int, float]:
    """The fused sums worked out by hand (the score is each divided by its most)."""
    return {r.chunk_id: r.metadata["raw_score"] for r in results}


def test_rrf_by_hand():
    fused = rrf_fuse([SPARSE, DENSE], [1.0, 1.0], k=60, top_k=10, names=["bm25", "dense"])
    scores = sums(fused)
    assert scores[1] == pytest.approx(1 / 61 + 1 / 63)
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert scores[2] == pytest.approx(1 / 62) and scores[4] == pytest.approx(1 / 62)
    assert ids(fused) == [1, 3, 2, 4]  # ties broken by chunk id
    assert fused[0].metadata["legs"] == {
        "bm25": {"score": 9.0, "rank": 1},
        "dense": {"score": 0.5, "rank": 3},
    }
    assert fused[3].metadata["legs"] == {"dense": {"score": 0.8, "rank": 2}}


def test_rrf_weights_and_top_k():
    fused = rrf_fuse([SPARSE, DENSE], [1.0, 3.0], k=0, top_k=2)
    # k=0: 1/rank. chunk 3: 1/3 + 3/1; chunk 4: 3/2; chunk 1: 1 + 3/3.
    assert ids(fused) == [3, 1]
    assert sums(fused)[3] == pytest.approx(1 / 3 + 3)


def test_relative_score_by_hand():
    fused = relative_score_fuse([SPARSE, DENSE], [1.0, 2.0], top_k=10)
    scores = sums(fused)
    # bm25 min-max: 1 -> 1, 2 -> 0.5, 3 -> 0; dense: 3 -> 1, 4 -> 0.75, 1 -> 0.
    assert scores == pytest.approx({1: 1.0, 2: 0.5, 3: 2.0, 4: 1.5})


def test_relative_to_best_by_hand():
    fused = relative_to_best_fuse([SPARSE, DENSE], [1.0, 2.0], top_k=10, names=["bm25", "dense"])
    scores = sums(fused)
    # bm25 / 9: 1 -> 1, 2 -> 2/3, 3 -> 1/3; dense / 0.9: 3 -> 1, 4 -> 8/9, 1 -> 5/9.
    assert scores == pytest.approx({1: 1 + 10 / 9, 2: 2 / 3, 3: 1 / 3 + 2, 4: 16 / 9})
    assert ids(fused) == [3, 1, 4, 2]


def test_relative_to_best_scores_from_another_list_have_no_rank():
    # Dense's score of chunk 2, which it did not rank itself, counts as any other.
    dense = [*DENSE, ScoredChunk(2, 0.45, {SCORED_FOR_FUSION: True})]
    fused = relative_to_best_fuse([SPARSE, dense], names=["bm25", "dense"])
    two = next(r for r in fused if r.chunk_id == 2)
    assert two.metadata["raw_score"] == pytest.approx(6 / 9 + 0.5)
    assert two.metadata["legs"] == {"bm25": {"score": 6.0, "rank": 2}, "dense": {"score": 0.45}}


def test_relative_to_best_a_list_without_a_positive_score_adds_nothing():
    fused = relative_to_best_fuse([SPARSE, ranked((4, -0.2), (1, -0.5))])
    assert sums(fused) == pytest.approx({1: 1.0, 2: 2 / 3, 3: 1 / 3, 4: 0})


def test_equal_scores_put_the_chunk_more_lists_hold_first():
    # bm25 holds chunk 9 alone (min-max: 1); dense ranks 5 first (1) and 9 last (0).
    fused = relative_score_fuse([ranked((9, 4.0)), ranked((5, 0.9), (6, 0.6), (9, 0.3))])
    assert ids(fused) == [9, 5, 6]
    assert [r.metadata["raw_score"] for r in fused] == pytest.approx([1.0, 1.0, 0.5])


def test_dbsf_by_hand():
    fused = dbsf_fuse([SPARSE], top_k=10)
    mean, sigma = 6.0, (6.0**0.5)  # population σ of 9, 6, 3
    low, high = mean - 3 * sigma, mean + 3 * sigma
    assert [r.score for r in fused] == pytest.approx([(s - low) / (high - low) for s in (9, 6, 3)])


def test_duplicates_within_a_list_count_once():
    fused = rrf_fuse([ranked((1, 2.0), (1, 1.0), (2, 0.5))], k=60, top_k=10)
    assert sums(fused) == pytest.approx({1: 1 / 61, 2: 1 / 62})


@pytest.mark.parametrize(
    ("fuse", "most"),
    [
        (lambda *a, **k: rrf_fuse(*a, k=60, **k), 1 / 61),
        (relative_score_fuse, 1.0),
        (relative_to_best_fuse, 1.0),
        (dbsf_fuse, 1.0),
    ],
)
def test_fused_scores_lie_in_0_1_as_sums_over_their_most(fuse, most):
    """Before, RRF gave sums near 0.03 and the weighted fusions up to the weights' sum."""
    fused = fuse([SPARSE, DENSE], [1.0, 2.0], top_k=10)
    for result in fused:
        assert 0.0 <= result.score <= 1.0
        assert result.score == pytest.approx(result.metadata["raw_score"] / (3.0 * most))
        assert result.metadata["retrieval_method"] in {
            "rrf",
            "relative_score",
            "relative_to_best",
            "dbsf",
        }
    if fuse is not dbsf_fuse:  # DBSF maps a list's best to 1 only 3 σ above its mean
        first = fuse([ranked((7, 2.0), (8, 1.0)), ranked((7, 0.9), (8, 0.1))], top_k=1)
        assert first[0].score == pytest.approx(1.0)


def test_top_k_none_keeps_every_chunk():
    assert ids(rrf_fuse([SPARSE, DENSE], top_k=None)) == [1, 3, 2, 4]
    assert len(relative_score_fuse([SPARSE, DENSE], top_k=None)) == 4


def test_bad_arguments():
    with pytest.raises(ValueError, match="2 ranked lists, 1 weights"):
        rrf_fuse([SPARSE, DENSE], [1.0])
    with pytest.raises(ValueError, match="top_k"):
        rrf_fuse([SPARSE], top_k=0)
    with pytest.raises(ValueError, match="k must be"):
        rrf_fuse([SPARSE], k=-1)


def test_retrieval_results_fuse_too():
    results = [
        RetrievalResult(chunk=Chunk(pk=pk, content=f"chunk {pk}"), score=score, rank=rank)
        for rank, (pk, score) in enumerate([(7, 0.9), (8, 0.1)])
    ]
    assert ids(rrf_fuse([results, ranked((8, 5.0))], k=60)) == [8, 7]


#: Chunks 2 and 4 are one document's (BM25's second, dense's second); 1 and 3 each their own.
DOCUMENTS = {2: 10, 4: 10, 1: 20, 3: 30}


def test_document_floor_by_hand():
    """A document's leading chunk gets from each list at least the floor's share of the
    best the list gave the document; its other chunks keep their own sums."""
    fused = relative_score_fuse(
        [SPARSE, DENSE], top_k=10, names=["bm25", "dense"], documents=DOCUMENTS, document_floor=0.8
    )
    # min-max: bm25 1 -> 1, 2 -> 0.5, 3 -> 0; dense 3 -> 1, 4 -> 0.75, 1 -> 0. Document 10
    # floored: chunk 2 0.5 + 0.8 * 0.75 = 1.1, chunk 4 0.8 * 0.5 + 0.75 = 1.15: 4 leads.
    assert sums(fused) == pytest.approx({1: 1.0, 2: 0.5, 3: 1.0, 4: 1.15})
    assert ids(fused) == [4, 1, 3, 2]  # without the floor: [1, 3, 4, 2]
    # What each list ranked is kept as it was: the floor only adds to the sum, and the
    # leader it lifted keeps its own sum beside.
    assert fused[0].metadata["legs"] == {"dense": {"score": 0.8, "rank": 2}}
    assert fused[0].metadata["own_score"] == pytest.approx(0.75)
    assert all("own_score" not in r.metadata for r in fused[1:])


@pytest.mark.parametrize(
    "fuse",
    [
        lambda *a, **k: rrf_fuse(*a, k=60, **k),
        relative_score_fuse,
        relative_to_best_fuse,
        dbsf_fuse,
    ],
)
def test_a_document_floor_changes_nothing_when_each_document_has_one_chunk(fuse):
    one_each = {chunk_id: 100 + chunk_id for chunk_id in (1, 2, 3, 4)}
    floored = fuse([SPARSE, DENSE], [1.0, 2.0], top_k=10, documents=one_each, document_floor=0.8)
    plain = fuse([SPARSE, DENSE], [1.0, 2.0], top_k=10)
    assert [(r.chunk_id, r.score) for r in floored] == [(r.chunk_id, r.score) for r in plain]


def test_a_document_floor_of_one_scores_a_documents_leader_as_the_document():
    """At 1, the leader has the document's best in each list (on a tie, the lower id leads)."""
    fused = relative_score_fuse([SPARSE, DENSE], top_k=10, documents=DOCUMENTS, document_floor=1)
    assert sums(fused) == pytest.approx({1: 1.0, 2: 1.25, 3: 1.0, 4: 0.75})


def test_a_documents_leader_on_a_tie_is_the_chunk_more_lists_hold():
    """Tied floored sums: the leader is picked as the fused order breaks ties (more lists
    first, then the lower id), not by id alone."""
    bm25, dense = ranked((2, 9.0), (3, 1.0)), ranked((1, 0.9), (2, 0.5), (3, 0.1))
    fused = relative_score_fuse(
        [bm25, dense], top_k=10, documents={1: 10, 2: 10, 3: 30}, document_floor=1
    )
    # Document 10 at floor 1: chunk 1 (dense only) and chunk 2 (both lists) both sum 2.
    assert ids(fused) == [2, 1, 3]
    assert sums(fused) == pytest.approx({2: 2.0, 1: 1.0, 3: 0.0})


def test_bad_document_floors():
    for floor in (-0.1, 1.5, True, "0.8"):
        with pytest.raises(ValueError, match="document_floor must be a number from 0 to 1"):
            relative_score_fuse([SPARSE], documents=DOCUMENTS, document_floor=floor)
    with pytest.raises(ValueError, match="needs each chunk's document"):
        relative_score_fuse([SPARSE], document_floor=0.5)
