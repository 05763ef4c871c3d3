"""Graph retrieval: a base retriever's hits, widened along knowledge-graph triples."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core import checks

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection, Triple
from retrieval.services.core.filters import Filters
from retrieval.services.graph.traversal import expand
from retrieval.services.registry import retrievers as retriever_registry
from retrieval.services.retrievers.base import BaseRetriever
from retrieval.services.types import ScoredChunk


class GraphRetriever(BaseRetriever):
    """Expand a base retriever's hits through the entities they mention.

    The base retriever (``retriever``, else the collection's default, else
    ``DEFAULT_RETRIEVER``) ranks ``seeds`` hits. The entities each hit mentions
    (its triples' ends and the graph entities in its text) start a beam search in
    PostgreSQL: each entity follows its ``beam_width`` most confident triples per
    hop, up to ``max_hops``. The source chunk of every triple followed joins the
    results with its seed's score times ``hop_decay`` per hop, unless the base
    already returned it; its ``metadata`` has ``graph_hop``, ``graph_triple``,
    ``graph_source_entity`` and ``graph_path``.

    Results are ordered by score. A base whose scores are compressed (reciprocal
    ranks: the 1st scores 1/61, the 16th 1/76 = 0.8/61) would otherwise leave no
    room for any expansion, so at least ``min(min_expanded, top_k // 2)`` results
    are expansions when there are any: they replace the weakest base results.
    """

    costly_prepare = True  # its base's preparation, usually embedding the query

    def __init__(
        self,
        *,
        retriever: str | None = None,
        beam_width: int = 3,
        max_hops: int = 2,
        hop_decay: float = 0.8,
        seeds: int = 10,
        max_seed_entities: int = 30,
        min_confidence: float = 0.0,
        predicates: Sequence[str] | None = None,
        min_expanded: int = 2,
    ) -> None:
        for name, value in (("beam_width", beam_width), ("max_hops", max_hops), ("seeds", seeds)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}.")
        if not isinstance(min_expanded, int) or min_expanded < 0:
            raise ValueError(f"min_expanded must be a non-negative integer, not {min_expanded!r}.")
        if not 0.0 < hop_decay <= 1.0:
            raise ValueError(f"hop_decay must be in (0, 1], not {hop_decay!r}.")
        if not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in [0, 1], not {min_confidence!r}.")
        self.retriever = retriever
        self.beam_width = beam_width
        self.max_hops = max_hops
        self.hop_decay = hop_decay
        self.seeds = seeds
        self.max_seed_entities = max_seed_entities
        self.min_confidence = min_confidence
        self.predicates = list(predicates) if predicates else None
        self.min_expanded = min_expanded

    def check(self) -> list:
        if self.retriever and (
            self.retriever == self.alias or self.retriever not in retriever_registry
        ):
            return [
                checks.Error(
                    f"Graph retriever {self.alias!r} wraps {self.retriever!r}, which is "
                    + ("itself." if self.retriever == self.alias else "not in RETRIEVERS."),
                    id="retrieval.E006",
                )
            ]
        return []

    def base_alias(self, collection: Collection) -> str:
        """Return the alias of the retriever whose hits are expanded."""
        alias = (
            self.retriever or collection.default_retriever or retrieval_settings.DEFAULT_RETRIEVER
        )
        if alias == self.alias or isinstance(retriever_registry[alias], GraphRetriever):
            raise RetrievalError(
                f"Graph retriever {self.alias!r} cannot wrap {alias!r}, another graph retriever: "
                "set its 'retriever' option to a dense, bm25 or hybrid retriever."
            )
        return alias

    def prepare(self, query: str, *, collection: Collection) -> Any:
        base = retriever_registry[self.base_alias(collection)]
        return base, base.prepare(query, collection=collection)

    def _rank(
        self, prepared: Any, *, collection: Collection, top_k: int, filters: Filters
    ) -> list[ScoredChunk]:
        base, inner = prepared
        hits = base.rank_prepared(
            inner, collection=collection, top_k=max(top_k, self.seeds), filters=filters
        )
        base_results = hits[:top_k]
        expansions = expand(
            collection,
            [(hit.chunk_id, hit.score) for hit in hits[: self.seeds]],
            beam_width=self.beam_width,
            max_hops=self.max_hops,
            hop_decay=self.hop_decay,
            max_seed_entities=self.max_seed_entities,
            min_confidence=self.min_confidence,
            predicates=self.predicates,
            filters=filters,
            exclude=[hit.chunk_id for hit in base_results],
        )
        triples = Triple.objects.in_bulk([e.triple_id for e in expansions])
        expanded: list[ScoredChunk] = []
        for expansion in expansions:
            triple = triples.get(expansion.triple_id)
            if triple is None:  # deleted since the walk
                continue
            expanded.append(
                ScoredChunk(
                    expansion.chunk_id,
                    expansion.score,
                    {
                        "graph_hop": expansion.hop,
                        "graph_triple": {
                            "id": triple.pk,
                            "subject": triple.subject,
                            "predicate": triple.predicate,
                            "object": triple.object,
                            "confidence": triple.confidence,
                        },
                        "graph_source_entity": expansion.source_entity,
                        "graph_path": list(expansion.path),
                        "graph_seed_chunk_id": expansion.seed_chunk_id,
                    },
                )
            )
        return merge(base_results, expanded, top_k=top_k, min_expanded=self.min_expanded)


def merge(
    base: Sequence[ScoredChunk], expanded: Sequence[ScoredChunk], *, top_k: int, min_expanded: int
) -> list[ScoredChunk]:
    """Return the best ``top_k`` of both lists by score, with at least
    ``min(min_expanded, top_k // 2, len(expanded))`` expansions."""
    # Stable: a base hit stays ahead of an expansion with the same score.
    merged = sorted([*base, *expanded], key=lambda s: -s.score)[:top_k]
    reserved = min(min_expanded, top_k // 2, len(expanded))
    chosen = {id(s) for s in merged}
    missing = reserved - sum(1 for s in expanded if id(s) in chosen)
    if missing > 0:
        extra = [s for s in expanded if id(s) not in chosen][:missing]
        kept_base = [s for s in merged if "graph_hop" not in s.metadata]
        kept_base = kept_base[: len(kept_base) - missing]
        kept = {id(s) for s in kept_base} | {id(s) for s in merged if "graph_hop" in s.metadata}
        merged = sorted([s for s in merged if id(s) in kept] + extra, key=lambda s: -s.score)
    return merged
