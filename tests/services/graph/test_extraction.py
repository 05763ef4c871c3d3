"""Extraction into the Triple table: links to chunks, incremental runs, deletes, aliases."""

from __future__ import annotations

import pytest

from retrieval.exceptions import InvalidComponentError
from retrieval.models import Entity, GraphExtraction, IndexRun, Triple
from retrieval.services.graph.entities import merge_entities
from retrieval.services.graph.extraction import extract_graph
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

pytestmark = pytest.mark.django_db

ATLAS = "Ada_Lovelace wrote Notes.\n\nNotes describe Analytical_Engines (0.6).\n\nThe sky is blue"
BIO = "Charles_Babbage designed Analytical_Engine.\n\nAda_Lovelace met Charles_Babbage."


def _keys(collection):
    return sorted(
        Triple.objects.filter(collection=collection).values_list(
            "subject_key", "predicate_key", "object_key"
        )
    )


@pytest.fixture
def library(graph_settings):
    collection, _ = get_or_create_collection("library")
    ingest(
        collection,
        [Source.from_text(ATLAS, external_id="atlas"), Source.from_text(BIO, external_id="bio")],
    )
    return collection


def test_triples_are_linked_to_their_chunks_with_normalised_keys(library, graph_settings):
    run = extract_graph(library)
    assert run.task == "graph" and run.status == IndexRun.Status.SUCCEEDED
    assert (run.documents_total, run.documents_indexed, run.chunks_written) == (5, 5, 4)
    assert _keys(library) == [
        ("ada lovelace", "met", "charles babbage"),
        ("ada lovelace", "wrote", "note"),
        ("charles babbage", "designed", "analytical engine"),
        ("note", "describe", "analytical engine"),
    ]
    notes = Triple.objects.get(collection=library, predicate="describe")
    assert notes.chunk.content == "Notes describe Analytical_Engines (0.6)."
    assert notes.chunk.document.external_id == "atlas"
    assert (notes.subject, notes.object, notes.confidence) == ("Notes", "Analytical Engines", 0.6)
    entities = dict(Entity.objects.filter(collection=library).values_list("key", "display"))
    assert entities["analytical engine"] in ("Analytical Engines", "Analytical Engine")
    assert set(entities) == {"ada lovelace", "note", "analytical engine", "charles babbage"}


def test_changed_only_extracts_only_texts_it_has_not_seen(library, graph_settings):
    extract_graph(library)
    graph_settings.seen.clear()
    again = extract_graph(library, changed_only=True)
    assert graph_settings.seen == [] and again.documents_total == 0
    # Reindexing the changed document replaces all its chunks; the triples of its
    # unchanged texts move to the new chunks.
    atlas_triples = Triple.objects.filter(chunk__document__external_id="atlas")
    kept = set(atlas_triples.values_list("pk", flat=True))
    changed = ATLAS.replace("The sky is blue", "Notes mention Bernoulli_numbers.")
    ingest(library, [Source.from_text(changed, external_id="atlas")])
    assert set(atlas_triples.values_list("pk", flat=True)) == kept and len(kept) == 2
    run = extract_graph(library, changed_only=True)
    assert graph_settings.seen == ["Notes mention Bernoulli_numbers."]
    assert (run.documents_indexed, run.documents_skipped) == (1, 0)
    assert ("note", "mention", "bernoulli number") in _keys(library)
    assert ("ada lovelace", "wrote", "note") in _keys(library)  # kept, not re-extracted
    assert len(_keys(library)) == 5
    # The extraction of the replaced text is forgotten.
    assert GraphExtraction.objects.filter(collection=library).count() == 5


def test_a_full_run_extracts_everything_again(library, graph_settings):
    extract_graph(library)
    graph_settings.seen.clear()
    extract_graph(library)
    assert len(graph_settings.seen) == 5
    assert len(_keys(library)) == 4


def test_deleting_a_document_removes_only_its_triples(library, graph_settings):
    extract_graph(library)
    library.documents.get(external_id="atlas").delete()
    assert _keys(library) == [
        ("ada lovelace", "met", "charles babbage"),
        ("charles babbage", "designed", "analytical engine"),
    ]
    extract_graph(library, changed_only=True)
    # "note" lost its only triples; entities other chunks still mention stay.
    assert sorted(Entity.objects.filter(collection=library).values_list("key", flat=True)) == [
        "ada lovelace",
        "analytical engine",
        "charles babbage",
    ]


def test_merged_aliases_hold_for_later_extractions(library, graph_settings):
    extract_graph(library)
    merge_entities(library, "Charles Babbage", into="Babbage")
    assert ("ada lovelace", "met", "babbage") in _keys(library)
    ingest(library, [Source.from_text("Charles_Babbage built Difference_Engine.", external_id="x")])
    extract_graph(library, changed_only=True)
    assert ("babbage", "built", "difference engine") in _keys(library)
    assert Entity.objects.get(collection=library, key="babbage").aliases == ["charles babbage"]


def test_a_failing_batch_fails_its_chunks_and_the_rest_is_written(library, retrieval_settings):
    retrieval_settings(
        EXTRACTORS={
            "default": {
                "BACKEND": "tests.support.extractors.SentenceExtractor",
                "OPTIONS": {"fail_on": "Charles_Babbage designed"},
            }
        }
    )
    run = extract_graph(library)
    assert run.status == IndexRun.Status.FAILED
    assert run.documents_failed == 1  # retried alone, only the culprit fails
    assert {e["document"] for e in run.errors} == {"bio"}
    assert "model refused" in run.errors[0]["error"]
    assert ("ada lovelace", "wrote", "note") in _keys(library)
    assert not Triple.objects.filter(collection=library, predicate="designed").exists()


def test_an_unknown_extractor_is_refused_before_any_run(library):
    with pytest.raises(InvalidComponentError, match="nope"):
        extract_graph(library, extractor="nope")
    assert not IndexRun.objects.filter(task="graph").exists()


def test_a_queued_run_is_used_and_progress_is_reported_per_batch(library, graph_settings):
    queued = IndexRun.objects.create(collection=library, task="graph")
    seen = []

    def progress(run: IndexRun) -> None:
        seen.append((run.documents_done, run.documents_total))

    run = extract_graph(library, run=queued, on_progress=progress)
    assert run.pk == queued.pk and run.status == IndexRun.Status.SUCCEEDED
    assert run.started_at and run.finished_at
    assert seen == [(2, 5), (4, 5), (5, 5)]  # batches of two texts
    assert IndexRun.objects.get(pk=queued.pk).documents_done == 5


def test_every_progress_save_beats_the_runs_heart(library, graph_settings, monkeypatch):
    """A long extraction on a worker must look alive to the stale-run sweep."""
    from retrieval.services.graph import extraction

    monkeypatch.setattr(extraction, "PROGRESS_INTERVAL", 0)  # save after every batch
    queued = IndexRun.objects.create(collection=library, task="graph")
    beats = []

    def progress(run: IndexRun) -> None:
        beats.append(IndexRun.objects.get(pk=run.pk).heartbeat_at)

    run = extract_graph(library, run=queued, on_progress=progress)
    assert len(beats) == 3 and beats == sorted(set(beats))  # a new heartbeat per batch
    assert run.started_at <= beats[0] and beats[-1] <= run.finished_at
