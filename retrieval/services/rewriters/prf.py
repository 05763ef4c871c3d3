"""Pseudo-relevance feedback: expand the query with terms of its best chunks (RM3-style).

Needs no language model, so agentic retrieval has a rewriter on a site with no key.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.registry import analyzers, retrievers
from retrieval.services.rewriters.base import BaseQueryRewriter, RetryFeedback, Rewrite, Turn

WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)


class RM3QueryRewriter(BaseQueryRewriter):
    """Append the ``feedback_terms`` words most probable under the top chunks' relevance model.

    Each of the ``feedback_chunks`` best chunks (by ``retriever``, BM25 by default)
    contributes ``P(term | chunk)`` weighted by its share of the scores; terms are
    the analyser's stems, written back as their most frequent surface word, and the
    query's own terms are not repeated. With ``history``, the user's previous turns
    are searched along with the query, so follow-up questions keep their topic. Terms
    come from the ``analyzer`` alias of ``ANALYZERS``.
    """

    method = "prf"
    supports_filters = True

    def __init__(
        self,
        *,
        retriever: str = "bm25",
        feedback_chunks: int = 8,
        feedback_terms: int = 8,
        analyzer: str = "default",
    ) -> None:
        if feedback_chunks < 1 or feedback_terms < 1:
            raise ValueError("feedback_chunks and feedback_terms must be at least 1.")
        self.retriever = retriever
        self.feedback_chunks = feedback_chunks
        self.feedback_terms = feedback_terms
        self.analyzer = analyzer

    def _rewrite(
        self,
        query: str,
        *,
        collection: Collection,
        history: list[Turn],
        filters: Filters | None = None,
    ) -> Rewrite:
        """Expand with terms of the best chunks the search may see (``filters``, scope)."""
        earlier = " ".join(t.get("content", "") for t in history if t.get("role") == "user")
        seed = f"{earlier} {query}".strip()
        results = retrievers[self.retriever].retrieve(
            seed, collection=collection, top_k=self.feedback_chunks, filters=filters
        )
        if not results:
            return Rewrite(query, (seed,), self.method, fallback=True, reason="no feedback chunks")
        expansion = self.expansion_terms(
            seed, [r.chunk.content for r in results], [r.score for r in results]
        )
        expanded = " ".join([seed, *expansion])
        details = {"expansion_terms": expansion}
        # With earlier turns, the seed (not its expansion) is the question as one query.
        return Rewrite(
            query, (expanded,), self.method, details=details, standalone=earlier and seed
        )

    def refine(
        self,
        query: str,
        *,
        collection: Collection,
        feedback: RetryFeedback,
        filters: Filters | None = None,
    ) -> Rewrite:
        """Expand ``query`` with words of the chunks found so far (``feedback.found``) that no
        query tried yet holds; with nothing found, expand from a fresh BM25 search."""
        if not feedback.found:
            return self.rewrite(query, collection=collection, filters=filters)
        texts = [text for text, _ in feedback.found]
        scores = [score for _, score in feedback.found]
        terms = self.expansion_terms(query, texts, scores, exclude=" ".join(feedback.tried))
        if not terms:
            reason = "the chunks found hold no word the queries tried lack"
            return self._record(Rewrite(query, (query,), self.method, fallback=True, reason=reason))
        expanded = " ".join([query, *terms])
        details = {"expansion_terms": terms, "feedback": "selected chunks"}
        return self._record(Rewrite(query, (expanded,), self.method, details=details))

    def expansion_terms(
        self, query: str, texts: list[str], scores: list[float], *, exclude: str = ""
    ) -> list[str]:
        """Return the best expansion words for ``query`` from feedback ``texts`` (none of
        the words of ``query`` or ``exclude``)."""
        analyzer = analyzers[self.analyzer]
        query_terms = set(analyzer.terms(f"{query} {exclude}"))
        total = sum(max(s, 0.0) for s in scores) or float(len(scores))
        weights: defaultdict[str, float] = defaultdict(float)
        surfaces: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for text, score in zip(texts, scores, strict=True):
            stem_counts: Counter[str] = Counter()
            for word, count in Counter(WORD.findall(text.lower())).items():
                stems = [] if word.isdigit() else analyzer.terms(word)
                if stems:  # a stop word has none
                    stem_counts[stems[0]] += count
                    surfaces[stems[0]][word] += count
            length = sum(stem_counts.values())
            share = (max(score, 0.0) or 1.0) / total
            for stem, count in stem_counts.items():
                weights[stem] += share * count / length
        ranked = sorted(
            (stem for stem in weights if stem not in query_terms and surfaces[stem]),
            key=lambda stem: (-weights[stem], stem),
        )
        return [surfaces[stem].most_common(1)[0][0] for stem in ranked[: self.feedback_terms]]
