"""Editors' synonyms in a BM25 query's analysis (the :class:`~retrieval.models.Synonym` rules).

A rule is two-way, ``couch, sofa`` (each word stands for the others), or one-way,
``tv -> television`` (``=>`` too, as in Solr's synonyms files): a query saying tv also
looks for television, not the other way. Words are analysed as the query is, so a rule
matches every form the analyzer folds together (tv, TVs); each word of a rule is one
index term (:func:`parse_rule` refuses others).

An expanded query term stays one term for BM25: its alternatives are OR'd, their
frequencies in a chunk summed and the rarest-looking of them taken as the term's
document frequency (the largest df, as Lucene's ``SynonymQuery`` does), so a synonym
never adds a term to the query nor outweighs the word it stands for
(``sparse/ranking.py``, ``GROUPED_SCORE_SQL``).

The rules of a collection (its own and those of no collection), analysed, are kept in
Django's cache for ``SYNONYMS_CACHE_TIMEOUT`` seconds; any change to a rule replaces the
cache's version key, so the next search reads the rules again. A site of several
processes needs a shared cache (Redis, Memcached, the database) for a change to reach
every process at once; with a per-process cache it reaches the others within the timeout.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import Q

from retrieval.conf import retrieval_settings
from retrieval.models import Collection, Synonym
from retrieval.services.core.databases import search_database
from retrieval.services.core.tracing import current_trace
from retrieval.services.sparse.analyzer import Analyzer

__all__ = ["ExpandedTerms", "expand", "forget_synonyms", "parse_rule"]

#: The arrow of a one-way rule.
ONE_WAY = re.compile(r"\s*(?:->|=>)\s*")
#: The cache key whose value names the current version of every collection's rules.
VERSION_KEY = "retrieval:synonyms:version"


class ExpandedTerms(list):
    """A query's analysed terms (in order, with repeats) and, for those a synonym
    fired on, their alternatives: ``alternatives[term]`` holds the term first."""

    def __init__(self, terms: Iterable[str], alternatives: dict[str, tuple[str, ...]]) -> None:
        super().__init__(terms)
        self.alternatives = alternatives

    def groups(self) -> list[tuple[tuple[str, ...], int]]:
        """Return each distinct term's alternatives (itself alone if none) and how many
        times the query holds it, in the query's order."""
        counts: dict[str, int] = {}
        for term in self:
            counts[term] = counts.get(term, 0) + 1
        return [(self.alternatives.get(term, (term,)), qtf) for term, qtf in counts.items()]


def parse_rule(rule: str) -> tuple[list[str], list[str]]:
    """Return a rule's words and the words they stand for (the same list for a two-way rule).

    Raise ``ValueError`` naming what is wrong: a rule of fewer than two words, or more
    than one arrow.
    """
    sides = ONE_WAY.split(rule.strip())
    if len(sides) > 2:
        raise ValueError("A one-way rule has one arrow: “tv -> television”.")
    lists = [[word.strip() for word in side.split(",") if word.strip()] for side in sides]
    if len(lists) == 1:
        if len(lists[0]) < 2:
            raise ValueError("Give two words or more, “couch, sofa”, or “tv -> television”.")
        return lists[0], lists[0]
    words, targets = lists
    if not words or not targets:
        raise ValueError("Give words on both sides of the arrow: “tv -> television”.")
    return words, targets


def rule_terms(rule: str, analyzer: Analyzer) -> tuple[list[str], list[str]]:
    """Return :func:`parse_rule`'s two lists as index terms.

    Raise ``ValueError`` for a word that is not one index term (a stop word, a phrase).
    """
    words, targets = parse_rule(rule)
    analysed = {}
    for word in {*words, *targets}:
        terms = analyzer.terms(word)
        if len(terms) != 1:
            raise ValueError(
                f"“{word}” is not one searchable word (a stop word, or several words): "
                "each word of a rule must be one."
            )
        analysed[word] = terms[0]
    return [analysed[w] for w in words], [analysed[w] for w in targets]


def forget_synonyms(**kwargs: Any) -> None:
    """Make the next search read the rules again (a receiver of a rule's save and delete)."""
    cache.set(VERSION_KEY, uuid.uuid4().hex, None)


def expand(
    terms: list[str], *, collection: Collection, analyzer: Analyzer, analyzer_alias: str
) -> list[str]:
    """Return ``terms`` as :class:`ExpandedTerms` if a synonym of ``collection`` fires
    on one (recorded in the search's trace as a ``synonyms`` event), else as they are."""
    rules = _expansions(collection, analyzer, analyzer_alias)
    if not rules or not terms:
        return terms
    alternatives: dict[str, list[str]] = {}
    fired: list[dict[str, Any]] = []
    for term in dict.fromkeys(terms):
        for rule_id, rule, targets in rules.get(term, ()):
            added = [t for t in targets if t != term]
            if not added:
                continue
            found = alternatives.setdefault(term, [term])
            found.extend(t for t in added if t not in found)
            fired.append({"synonym_id": rule_id, "rule": rule, "term": term, "added": added})
    if not alternatives:
        return terms
    trace = current_trace()
    if trace is not None:
        trace.record("synonyms", fired=fired)
    return ExpandedTerms(terms, {term: tuple(alts) for term, alts in alternatives.items()})


def _expansions(
    collection: Collection, analyzer: Analyzer, analyzer_alias: str
) -> dict[str, list[tuple[int, str, list[str]]]]:
    """Return each index term's rules of ``collection``: (id, rule, terms it adds)."""
    version = cache.get(VERSION_KEY)
    if version is None:
        version = uuid.uuid4().hex
        cache.add(VERSION_KEY, version, None)
        version = cache.get(VERSION_KEY, version)
    key = f"retrieval:synonyms:{version}:{collection.pk}:{analyzer_alias}"
    found = cache.get(key)
    if found is None:
        found = _read_rules(collection, analyzer)
        cache.set(key, found, retrieval_settings.SYNONYMS_CACHE_TIMEOUT)
    return found


def _read_rules(
    collection: Collection, analyzer: Analyzer
) -> dict[str, list[tuple[int, str, list[str]]]]:
    rows = (
        Synonym.objects.using(search_database())
        .filter(Q(collection=collection) | Q(collection__isnull=True), active=True)
        .order_by("pk")
        .values_list("pk", "rule")
    )
    by_term: dict[str, list[tuple[int, str, list[str]]]] = {}
    for pk, rule in rows:
        try:
            words, targets = rule_terms(rule, analyzer)
        except ValueError:  # valid for the admin's analyzer, not this retriever's: skipped
            continue
        for word in dict.fromkeys(words):
            by_term.setdefault(word, []).append((pk, rule, targets))
    return by_term
