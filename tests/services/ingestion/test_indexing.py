"""Ingestion on the real database: offsets, idempotency, atomic replacement, failures."""

from __future__ import annotations

import time

import pytest

from retrieval.models import Chunk, Document, IndexRun
from retrieval.services.access import Scope
from retrieval.services.ingestion.collections import get_or_create_collection
from retrieval.services.ingestion.ingest import Source, ingest
from retrieval.services.parsers.base import BaseParser
from retrieval.services.parsers.budget import ParseBudget
from retrieval.services.query.search import search
from retrieval.services.types import ParsedDocument

pytestmark = pytest.mark.django_db

TWO_PARAGRAPHS = "North is where the compass points.\n\nEast is where the sun rises up."
THREE_PARAGRAPHS = (
    "North again, and north once more.\n\n"
    "Now east, only east, always east.\n\n"
    "And up, straight up, up again."
)


@pytest.fixture
def collection(keyword_settings):
    return get_or_create_collection("notes")[0]


def _chunks(document: Document) -> list[Chunk]:
    return list(document.chunks.order_by("index"))


def test_ingest_stores_document_chunks_and_run(collection):
    run = ingest(
        collection, [Source.from_text(TWO_PARAGRAPHS, external_id="a.txt", metadata={"lang": "en"})]
    )
    assert run.status == IndexRun.Status.SUCCEEDED
    assert (run.documents_indexed, run.documents_failed, run.chunks_written) == (1, 0, 2)
    assert run.started_at <= run.finished_at
    document = Document.objects.get(collection=collection, external_id="a.txt")
    assert document.status == Document.Status.INDEXED
    assert document.content == TWO_PARAGRAPHS
    chunks = _chunks(document)
    assert [c.content for c in chunks] == TWO_PARAGRAPHS.split("\n\n")
    for chunk in chunks:
        assert chunk.content == document.content[chunk.start : chunk.end]
        assert chunk.token_count > 0
        assert len(chunk.embedding) == collection.dimensions
        assert chunk.metadata == document.metadata and document.metadata["lang"] == "en"
        assert chunk.collection_id == collection.pk


def test_reingesting_unchanged_content_is_a_no_op(collection):
    source = Source.from_text(TWO_PARAGRAPHS, external_id="a.txt")
    ingest(collection, [source])
    before = list(Chunk.objects.filter(document__external_id="a.txt").values_list("pk", flat=True))
    run = ingest(collection, [source])
    assert (run.documents_skipped, run.documents_indexed, run.chunks_written) == (1, 0, 0)
    assert (
        list(Chunk.objects.filter(document__external_id="a.txt").values_list("pk", flat=True))
        == before
    )
    forced = ingest(collection, [source], force=True)
    assert forced.documents_indexed == 1


def test_changed_content_replaces_the_chunks(collection):
    ingest(collection, [Source.from_text(TWO_PARAGRAPHS, external_id="a.txt")])
    ingest(collection, [Source.from_text(THREE_PARAGRAPHS, external_id="a.txt")])
    document = Document.objects.get(external_id="a.txt")
    assert [c.content for c in _chunks(document)] == THREE_PARAGRAPHS.split("\n\n")
    assert Chunk.objects.filter(collection=collection).count() == 3


def test_failure_halfway_keeps_the_old_chunks_searchable(collection, retrieval_settings):
    ingest(collection, [Source.from_text(TWO_PARAGRAPHS, external_id="a.txt")])
    old = [(c.pk, c.content) for c in _chunks(Document.objects.get(external_id="a.txt"))]
    old_hash = Document.objects.get(external_id="a.txt").content_hash
    # One text per embedding call; the second call fails, halfway through the new version.
    retrieval_settings(
        EMBEDDERS={
            "default": {
                "BACKEND": "tests.support.embedders.FailingEmbedder",
                "OPTIONS": {"fail_from_call": 2},
            }
        },
        EMBED_BATCH_SIZE=1,
    )
    run = ingest(collection, [Source.from_text(THREE_PARAGRAPHS, external_id="a.txt")])
    assert run.status == IndexRun.Status.FAILED
    assert run.errors == [{"document": "a.txt", "error": "embedding service unavailable (call 2)"}]
    document = Document.objects.get(external_id="a.txt")
    assert document.status == Document.Status.FAILED
    assert "unavailable" in document.error
    assert document.content == TWO_PARAGRAPHS and document.content_hash == old_hash
    assert [(c.pk, c.content) for c in _chunks(document)] == old
    retrieval_settings(EMBEDDERS={"default": {"BACKEND": "retrieval.testing.KeywordEmbedder"}})
    hits = search("north", collection=collection, top_k=1, scope=Scope.ALL)
    assert hits[0].chunk.content == "North is where the compass points."
    # The same new bytes are retried (not skipped) once the embedder works again.
    retry = ingest(collection, [Source.from_text(THREE_PARAGRAPHS, external_id="a.txt")])
    assert retry.documents_indexed == 1
    assert Document.objects.get(external_id="a.txt").status == Document.Status.INDEXED


def test_a_bad_file_fails_alone_and_the_run_goes_on(collection):
    sources = [
        Source(
            external_id="broken.pdf",
            data=b"%PDF-1.7 this is not really a pdf",
            filename="broken.pdf",
        ),
        Source(external_id="photo.gif", data=b"GIF89a", filename="photo.gif"),
        Source.from_text(TWO_PARAGRAPHS, external_id="good.txt"),
    ]
    run = ingest(collection, sources)
    assert run.status == IndexRun.Status.FAILED
    assert (run.documents_indexed, run.documents_failed, run.documents_done) == (1, 2, 3)
    errors = {e["document"]: e["error"] for e in run.errors}
    assert set(errors) == {"broken.pdf", "photo.gif"}
    assert "No parser accepts photo.gif" in errors["photo.gif"]
    assert errors["broken.pdf"]
    assert Document.objects.get(external_id="good.txt").status == Document.Status.INDEXED
    failed = Document.objects.get(external_id="broken.pdf")
    assert failed.status == Document.Status.FAILED and not failed.chunks.exists()
    assert "2 failed" in run.message


def test_embedder_of_another_dimension_is_refused(collection, retrieval_settings):
    retrieval_settings(
        EMBEDDERS={
            "default": {
                "BACKEND": "retrieval.testing.KeywordEmbedder",
                "OPTIONS": {"keywords": ["a", "b", "c", "d"]},
            }
        }
    )
    run = ingest(collection, [Source.from_text(TWO_PARAGRAPHS, external_id="a.txt")])
    assert run.documents_failed == 1
    assert "4-dimensional" in run.errors[0]["error"] and "3-dimensional" in run.errors[0]["error"]
    assert not Chunk.objects.exists()


def test_nul_characters_are_stored_without_shifting_offsets(collection):
    text = "north\x00pole\n\neast"
    ingest(
        collection,
        [
            Source(external_id="nul.json", data=b'{"a": "north\\u0000pole"}', filename="nul.json"),
            Source.from_text(text.replace("\x00", " "), external_id="plain.txt"),
        ],
    )
    document = Document.objects.get(external_id="nul.json")
    assert "\x00" not in document.content
    for chunk in document.chunks.all():
        assert chunk.content == document.content[chunk.start : chunk.end]


def test_a_nul_in_a_title_or_metadata_fails_that_document_alone(collection):
    sources = [
        Source.from_text("north", external_id="first"),
        Source.from_text("north", external_id="titled", title="North\x00Pole"),
        Source.from_text("north", external_id="tagged", metadata={"tags": ["a", "b\x00"]}),
        Source.from_text("east", external_id="last"),
    ]
    run = ingest(collection, sources)  # a NUL title used to end the whole run
    assert (run.documents_indexed, run.documents_failed, run.documents_done) == (2, 2, 4)
    errors = {e["document"]: e["error"] for e in run.errors}
    assert errors == {
        "titled": "The title contains a NUL character (\\u0000), which PostgreSQL cannot store.",
        "tagged": "The metadata.tags[1] contains a NUL character (\\u0000), which PostgreSQL "
        "cannot store.",
    }
    states = dict(Document.objects.values_list("external_id", "status"))
    assert states == {"first": "indexed", "titled": "failed", "tagged": "failed", "last": "indexed"}
    with pytest.raises(ValueError, match="external_id contains a NUL"):
        Source.from_text("north", external_id="a\x00b")


def test_deleting_a_document_removes_its_chunks(collection):
    ingest(
        collection,
        [
            Source.from_text(TWO_PARAGRAPHS, external_id="a.txt"),
            Source.from_text("up", external_id="b.txt"),
        ],
    )
    Document.objects.get(external_id="a.txt").delete()
    assert list(Chunk.objects.values_list("document__external_id", flat=True)) == ["b.txt"]
    assert [
        r.chunk.document.external_id
        for r in search("north", collection=collection, scope=Scope.ALL)
    ] == ["b.txt"]


class SemicolonParser(BaseParser):
    """A site's own parser: ``key;value`` lines become ``key: value``."""

    mime_types = ("text/x-semicolon",)
    extensions = (".scsv",)

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        lines = [line.split(";", 1) for line in data.decode().splitlines() if ";" in line]
        return ParsedDocument(text="\n\n".join(f"{k}: {v}" for k, v in lines), title="semicolons")


def test_a_site_registers_its_own_parser(collection, retrieval_settings):
    source = Source(external_id="dirs.scsv", data=b"north;up\neast;right", filename="dirs.scsv")
    assert ingest(collection, [source]).documents_failed == 1  # no parser knows .scsv yet
    backend = "tests.services.ingestion.test_indexing.SemicolonParser"
    retrieval_settings(PARSERS={"semicolon": {"BACKEND": backend}})
    run = ingest(collection, [source])
    assert run.documents_indexed == 1
    document = Document.objects.get(external_id="dirs.scsv")
    assert (document.title, document.content) == ("semicolons", "north: up\n\neast: right")
    assert document.mime_type == "text/x-semicolon"


def test_an_ingest_leaves_nothing_pending_in_the_metadata_indexes(collection):
    # A GIN pending list would be read whole by every metadata-filtered search until a vacuum.
    from django.db import connection

    sources = [
        Source.from_text(f"Note {i}: {TWO_PARAGRAPHS}", external_id=f"{i}.txt", metadata={"n": i})
        for i in range(20)
    ]
    assert ingest(collection, sources).status == IndexRun.Status.SUCCEEDED
    with connection.cursor() as cursor:
        for index in ("retrieval_chunk_metadata_gin", "retrieval_doc_metadata_gin"):
            cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [index])
            assert cursor.fetchone()[0] == 0, index  # pending pages merged by this call: none


def test_each_document_is_written_once_its_vectors_are_in(collection, retrieval_settings):
    # Progress moves while a group embeds: a 10-document reindex showed 0 / 10 until its
    # one group of documents was embedded, then 10 / 10.
    from retrieval.services.registry import embedders

    retrieval_settings(EMBED_BATCH_SIZE=1)
    embedder = embedders[collection.embedder]
    calls_when_written: list[int] = []
    embedder.calls = 0
    sources = [
        Source.from_text(f"Note {i} of the north.", external_id=f"{i}.txt") for i in range(4)
    ]
    run = ingest(
        collection, sources, on_result=lambda result: calls_when_written.append(embedder.calls)
    )
    assert run.documents_indexed == 4
    assert calls_when_written == [1, 2, 3, 4]  # was [4, 4, 4, 4]


class SlowPagesParser(BaseParser):
    """Reads a page a second, checking its budget between pages, as the OCR parser does;
    notes the run's heartbeat (read from the database) before each page."""

    mime_types = ("text/x-slow-pages",)
    extensions = (".slow",)
    beats: list = []

    def _parse(self, data: bytes, *, filename: str | None = None) -> ParsedDocument:
        budget = ParseBudget(filename or "the file")
        pages = data.decode().split("|")
        for number, _ in enumerate(pages, start=1):
            budget.check(f"before page {number}")
            run = IndexRun.objects.filter(status=IndexRun.Status.RUNNING).get()
            type(self).beats.append(run.heartbeat_at)
            time.sleep(0.6)
        return ParsedDocument(text="\n\n".join(pages))


def test_a_long_parse_beats_the_runs_heart_between_its_pages(collection, retrieval_settings):
    # A scanned PDF read by OCR may take MAX_OCR_SECONDS (600) inside one document, longer
    # than RUN_HEARTBEAT_TIMEOUT (300): without a beat while it parses, the stale-run sweep
    # took a working run for dead and resumed it beside itself.
    retrieval_settings(
        PARSERS={"slow": {"BACKEND": "tests.services.ingestion.test_indexing.SlowPagesParser"}}
    )
    SlowPagesParser.beats = []
    source = Source(external_id="scan.slow", data=b"one|two|three", filename="scan.slow")
    assert ingest(collection, [source]).documents_indexed == 1
    first, *later = SlowPagesParser.beats
    assert len(later) == 2 and later[-1] > later[0] > first
