"""Indexing documents again keeps their knowledge graph: the same triples on the new chunks
of unchanged texts, the changed texts extracted again."""

from __future__ import annotations

import pytest

from retrieval.models import Chunk, IndexRun, Triple
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.ingestion.runs import enqueue_run

pytestmark = pytest.mark.django_db

NOTES = "Ada_Lovelace wrote Notes.\n\nNotes describe Analytical_Engines."
BIO = "Charles_Babbage designed Analytical_Engine.\n\nAda_Lovelace met Charles_Babbage."


def triples_by_text(collection):
    """{chunk text: sorted triple ids} of the collection."""
    found: dict[str, list[int]] = {}
    for pk, text in Triple.objects.filter(collection=collection).values_list(
        "pk", "chunk__content"
    ):
        found.setdefault(text, []).append(pk)
    return {text: sorted(ids) for text, ids in found.items()}


@pytest.fixture
def shelf(graph_settings, tmp_path):
    """Two documents read from files, their graph extracted."""
    collection, _ = get_or_create_collection("shelf")
    for name, text in (("notes.txt", NOTES), ("bio.txt", BIO)):
        (tmp_path / name).write_text(text)
    ingest(
        collection,
        [Source.from_path(tmp_path / name, external_id=name) for name in ("notes.txt", "bio.txt")],
    )
    extract_graph(collection)
    graph_settings.seen.clear()
    return collection


def test_a_forced_reindex_moves_every_triple_to_the_new_chunk_of_its_text(shelf, tmp_path):
    before = triples_by_text(shelf)
    chunks = Chunk.objects.filter(collection=shelf)
    old_chunks = set(chunks.values_list("pk", flat=True))
    assert len(before) == 4
    names = ("notes.txt", "bio.txt")
    ingest(shelf, [Source.from_path(tmp_path / n, external_id=n) for n in names], force=True)
    assert not old_chunks & set(chunks.values_list("pk", flat=True))
    assert triples_by_text(shelf) == before  # the same rows, on the new chunks


def test_chunks_of_the_same_text_keep_one_set_of_triples_each(graph_settings):
    collection, _ = get_or_create_collection("echo")
    twice = "Ada_Lovelace wrote Notes.\n\nAda_Lovelace wrote Notes."
    ingest(collection, [Source.from_text(twice, external_id="echo")])
    extract_graph(collection)
    before = set(Triple.objects.values_list("pk", "chunk__index"))
    assert len(before) == 2
    once = "Ada_Lovelace wrote Notes."
    ingest(collection, [Source.from_text(once, external_id="echo")])
    assert Triple.objects.count() == 1 and Triple.objects.get().chunk.content == once
    ingest(collection, [Source.from_text(twice, external_id="echo")], force=True)
    assert Triple.objects.count() == 1  # the second chunk waits for an extraction


def test_a_reindex_keeps_unchanged_texts_and_extracts_the_changed_ones(
    shelf, graph_settings, tmp_path
):
    before = triples_by_text(shelf)
    (tmp_path / "bio.txt").write_text(BIO.replace("met", "admired"))
    run = enqueue_run("reindex_collection", shelf.pk, collection=shelf)
    assert run.status == IndexRun.Status.SUCCEEDED and run.documents_indexed == 2
    graph_run = IndexRun.objects.get(pk=run.options["graph_run"])
    assert f"graph extraction of the changed chunks: index run #{graph_run.pk}" in run.message
    assert graph_run.task == "extract_graph" and graph_run.status == IndexRun.Status.SUCCEEDED
    assert graph_run.options["changed_only"] is True
    assert graph_settings.seen == ["Ada_Lovelace admired Charles_Babbage."]
    after = triples_by_text(shelf)
    changed = "Ada_Lovelace met Charles_Babbage."
    assert {text: ids for text, ids in after.items() if text in before} == {
        text: ids for text, ids in before.items() if text != changed
    }
    assert Triple.objects.filter(predicate="admired").count() == 1


def test_a_reindex_of_a_collection_without_a_graph_extracts_nothing(graph_settings):
    collection, _ = get_or_create_collection("plain")
    ingest(collection, [Source.from_text(NOTES, external_id="notes")])
    run = enqueue_run("reindex_collection", collection.pk, collection=collection)
    assert run.status == IndexRun.Status.SUCCEEDED and "graph_run" not in run.options
    assert not IndexRun.objects.filter(task="extract_graph").exists()
    assert graph_settings.seen == [] and not Triple.objects.exists()


def test_the_extraction_uses_the_extractor_that_built_the_graph(shelf, retrieval_settings):
    extractors = {
        "default": {"BACKEND": "tests.support.extractors.SentenceExtractor"},
        "other": {"BACKEND": "tests.support.extractors.SentenceExtractor"},
    }
    retrieval_settings(EXTRACTORS=extractors)
    extract_graph(shelf, extractor="other")
    run = enqueue_run("reindex_collection", shelf.pk, collection=shelf)
    graph_run = IndexRun.objects.get(pk=run.options["graph_run"])
    assert graph_run.options["extractor"] == "other"
    assert graph_run.documents_indexed == 0  # every text was read by "other" before
