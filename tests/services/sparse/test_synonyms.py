"""Editors' synonyms in the BM25 leg: taking effect on the next search, one term for BM25."""

from __future__ import annotations

import pytest
from django.db.models import Q

import retrieval
from retrieval.models import Synonym
from retrieval.services.access import Scope
from retrieval.services.retrievers.bm25 import BM25Retriever
from retrieval.services.sparse.analyzer import Analyzer
from retrieval.services.sparse.synonyms import ExpandedTerms, parse_rule, rule_terms
from tests.conftest import collection_of

pytestmark = pytest.mark.django_db

TEXTS = {
    "tv": "the television in the lounge",
    "couch": "a couch by the window",
    "sofa": "a sofa by the door",
    "both": "couch sofa",
    "river": "the river runs north",
    "secret": "the secret television plans",
}


def public_only(user):
    """DOCUMENT_ACCESS for these tests: everything but the secret plans."""
    return ~Q(external_id="secret")


@pytest.fixture
def shop(keyword_settings):
    return collection_of("shop", TEXTS)


def search(query: str, **options):
    options.setdefault("scope", Scope.ALL)
    return retrieval.search(query, collection="shop", retriever="bm25", **options)


def ids(results) -> set[str]:
    return {result.chunk.document.external_id for result in results}


def events(results, stage: str) -> list[dict]:
    return [e for e in results.trace["events"] if e["stage"] == stage]


def test_a_one_way_synonym_takes_effect_on_the_next_search_and_is_traced(shop):
    assert ids(search("tv")) == set()  # no document says tv
    assert events(search("tv"), "synonyms") == []
    rule = Synonym.objects.create(collection=shop, rule="tv -> television")
    results = search("tv")
    assert ids(results) == {"tv", "secret"}
    (event,) = events(results, "synonyms")
    assert event["fired"] == [
        {"synonym_id": rule.pk, "rule": "tv -> television", "term": "tv", "added": ["televis"]}
    ]
    # One-way: television does not look for tv.
    assert events(search("television"), "synonyms") == []
    # Switched off, then deleted: gone on the next search.
    rule.active = False
    rule.save()
    assert ids(search("tv")) == set()
    rule.active = True
    rule.save()
    assert ids(search("TV")) == {"tv", "secret"}  # analysed as the query is
    rule.delete()
    assert ids(search("tv")) == set()


def test_a_two_way_synonym_and_a_rule_of_every_collection(shop):
    other = collection_of("other", {"seat": "a sofa in the hall"})
    assert ids(search("couch")) == {"couch", "both"}
    Synonym.objects.create(rule="couch, sofa")  # no collection: every collection
    assert ids(search("couch")) == {"couch", "sofa", "both"}
    assert ids(search("sofa")) == {"couch", "sofa", "both"}
    found = retrieval.search("couch", collection=other, retriever="bm25", scope=Scope.ALL)
    assert ids(found) == {"seat"}
    Synonym.objects.create(collection=other, rule="river -> sofa")
    assert events(search("river"), "synonyms") == []  # the other collection's rule


def test_an_expanded_term_counts_as_one_query_term(shop):
    Synonym.objects.create(collection=shop, rule="couch, sofa")
    results = search("couch", top_k=10)
    scores = {r.chunk.document.external_id: r.metadata["raw_score"] for r in results}
    # The same length and the same group: a chunk saying sofa scores as one saying couch.
    assert scores["couch"] == pytest.approx(scores["sofa"])
    # Saying both is one term said twice (saturating), not two query terms' worth.
    assert scores["both"] < 2 * scores["couch"]


def test_the_grouped_ranking_without_alternatives_is_bm25(shop):
    retriever = BM25Retriever(prune=False)
    terms = retriever.prepare("couch by the window sofa", collection=shop)
    plain = retriever.score(terms, collection=shop, top_k=10)
    grouped = retriever.score(ExpandedTerms(terms, {}), collection=shop, top_k=10)
    assert [chunk for chunk, _ in grouped] == [chunk for chunk, _ in plain]
    assert [score for _, score in grouped] == pytest.approx([score for _, score in plain])
    chunk_ids = [chunk for chunk, _ in plain]
    assert retriever.score_chunks(
        ExpandedTerms(terms, {}), chunk_ids, collection=shop
    ) == pytest.approx(retriever.score_chunks(terms, chunk_ids, collection=shop))


def test_synonyms_stay_within_the_readers_scope(shop, retrieval_settings):
    retrieval_settings(DOCUMENT_ACCESS="tests.services.sparse.test_synonyms.public_only")
    Synonym.objects.create(collection=shop, rule="tv -> television")
    reader = _reader()
    assert ids(search("tv", scope=None, user=reader)) == {"tv"}
    within = {"documents": ["tv", "secret"]}
    assert ids(search("tv", scope=None, user=reader, filters=within)) == {"tv"}
    assert ids(search("tv", filters={"documents": ["secret"]})) == {"secret"}


def test_the_hybrid_pipeline_uses_synonyms_in_its_bm25_leg(shop):
    Synonym.objects.create(collection=shop, rule="tv -> television")
    results = retrieval.search("tv", collection="shop", scope=Scope.ALL, retriever="hybrid")
    assert "tv" in ids(results)
    assert events(results, "synonyms")


def test_rules_are_parsed_and_refused_with_a_reason():
    assert parse_rule("couch, sofa") == (["couch", "sofa"], ["couch", "sofa"])
    assert parse_rule(" tv => television, telly ") == (["tv"], ["television", "telly"])
    for bad in ("couch", "a -> b -> c", "-> tv", "tv ->"):
        with pytest.raises(ValueError):
            parse_rule(bad)
    with pytest.raises(ValueError, match="the"):
        rule_terms("the -> television", Analyzer())
    with pytest.raises(ValueError, match="flat screen"):
        rule_terms("tv -> flat screen", Analyzer())


def _reader():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username="reader", password="x")


def test_rules_read_before_a_change_commits_are_read_again_after(
    shop, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        rule = Synonym.objects.create(collection=shop, rule="tv -> television")
        # Another process's search, which cannot see the uncommitted rule yet, caches
        # the rules as they were (here: the rule made invisible without a signal).
        Synonym.objects.filter(pk=rule.pk).update(active=False)
        assert ids(search("tv")) == set()
        Synonym.objects.filter(pk=rule.pk).update(active=True)
    assert ids(search("tv")) == {"tv", "secret"}  # the commit made it read them again
