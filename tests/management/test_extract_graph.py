"""``retrieval_extract_graph`` end to end, including its error exits."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from retrieval.models import IndexRun, Triple
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest

pytestmark = pytest.mark.django_db
TEXT = "Ada_Lovelace wrote Notes.\n\nNotes describe Analytical_Engines."


@pytest.fixture
def library(graph_settings):
    collection, _ = get_or_create_collection("library")
    ingest(
        collection,
        [
            Source.from_text(
                "Ada_Lovelace wrote Notes.\n\nNotes describe Analytical_Engines.", external_id="a"
            )
        ],
    )
    return collection


def extract(*args: str) -> str:
    out = StringIO()
    call_command("retrieval_extract_graph", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_extracts_then_changed_only_extracts_nothing_new(library, graph_settings):
    assert "2 chunks extracted, 0 restored, 0 failed, 2 triples written" in extract(
        "--collection", "library"
    )
    assert Triple.objects.filter(collection=library).count() == 2
    graph_settings.seen.clear()
    assert "0 chunks extracted" in extract("--collection", "library", "--changed-only")
    assert graph_settings.seen == []
    runs = IndexRun.objects.filter(task="graph").order_by("pk")
    assert [r.options["changed_only"] for r in runs] == [False, True]
    assert all(r.status == IndexRun.Status.SUCCEEDED for r in runs)


def test_unknown_collection_or_extractor_is_a_command_error(library):
    with pytest.raises(CommandError, match="No collection named 'nope'"):
        extract("--collection", "nope")
    with pytest.raises(CommandError, match="Unknown extractor 'nope'"):
        extract("--collection", "library", "--extractor", "nope")


def test_a_failed_run_exits_non_zero_with_its_reason(library, retrieval_settings):
    retrieval_settings(
        EXTRACTORS={
            "broken": {
                "BACKEND": "retrieval.services.extractors.syntactic.SpacyTripleExtractor",
                "OPTIONS": {"model": "no_such_spacy_model"},
            }
        }
    )
    with pytest.raises(CommandError, match=r"failed: .*django-retrieval\[graph\]"):
        extract("--collection", "library", "--extractor", "broken")
    run = IndexRun.objects.get(task="graph")
    assert run.status == IndexRun.Status.FAILED
    assert "no_such_spacy_model" in run.message
