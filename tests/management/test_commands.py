"""``retrieval_ingest`` and ``retrieval_search`` end to end, including error exits."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pymupdf
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from retrieval.models import Collection, Document, IndexRun
from tests.support.processes import database_url, manage

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A folder of small documents, one of them corrupt, one hidden, one unsupported."""
    root = tmp_path / "library"
    (root / "nested").mkdir(parents=True)
    (root / "north.txt").write_text(
        "North is at the top of most maps.\n\nThe needle of a compass points north."
    )
    (root / "nested" / "east.md").write_text(
        "# Directions\n\n## East\n\nThe sun rises in the east."
    )
    pdf = pymupdf.open()  # a chapter a page: a chunk would run on over a page turn inside one
    for text in ("North\nPage one points north.", "Up\nPage two looks up."):
        pdf.new_page().insert_text((72, 72), text)
    pdf.set_toc([[1, "North", 1], [1, "Up", 2]])
    (root / "nested" / "atlas.pdf").write_bytes(pdf.tobytes())
    (root / "nested" / "corrupt.pdf").write_bytes(b"%PDF-1.4 truncated")
    (root / ".hidden.txt").write_text("north north north")
    (root / "picture.gif").write_bytes(b"GIF89a")  # a kind no parser reads
    return root


def test_ingest_reports_indexed_and_failed_then_exits_non_zero(keyword_settings, library):
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 4 documents failed"):
        call_command(
            "retrieval_ingest", str(library), "--collection", "atlas", stdout=out, stderr=StringIO()
        )
    text = out.getvalue()
    assert "Created collection 'atlas'" in text
    assert "indexed  library/north.txt (2 chunks)" in text
    assert "indexed  library/nested/east.md" in text
    assert "indexed  library/nested/atlas.pdf (2 chunks)" in text
    assert "failed   library/nested/corrupt.pdf:" in text
    assert ".hidden" not in text
    assert "left out library/picture.gif: no configured parser reads .gif files" in text
    collection = Collection.objects.get(name="atlas")
    assert collection.documents.filter(status="indexed").count() == 3
    pdf_pages = list(
        Document.objects.get(external_id="library/nested/atlas.pdf").chunks.values_list(
            "page", flat=True
        )
    )
    assert pdf_pages == [1, 2]
    heading = Document.objects.get(external_id="library/nested/east.md").chunks.last().heading_path
    assert heading == ["Directions", "East"]
    assert IndexRun.objects.get().status == IndexRun.Status.FAILED


def test_a_folder_of_unreadable_files_names_each_and_fails(keyword_settings, tmp_path):
    # Was "0 indexed, 0 skipped, 0 failed" and exit 0, naming none of them.
    folder = tmp_path / "drawings"
    folder.mkdir()
    (folder / "plan.dwg").write_bytes(b"AC1032 drawing")
    (folder / "LICENSE").write_text("all rights reserved")
    out = StringIO()
    with pytest.raises(CommandError, match=r"No file was indexed: 2 left out"):
        call_command("retrieval_ingest", str(folder), "--collection", "plans", stdout=out)
    assert out.getvalue().splitlines() == [
        "left out drawings/LICENSE: no configured parser reads files without an extension",
        "left out drawings/plan.dwg: no configured parser reads .dwg files",
    ]
    assert not Document.objects.exists()


def test_second_ingest_skips_unchanged_files(keyword_settings, library):
    (library / "nested" / "corrupt.pdf").unlink()
    run("retrieval_ingest", str(library), "--collection", "atlas")
    (library / "north.txt").write_text("North changed.\n\nStill north.")
    text = run("retrieval_ingest", str(library), "--collection", "atlas")
    assert "skipped  library/nested/east.md (unchanged)" in text
    assert "indexed  library/north.txt" in text
    assert "1 indexed, 2 skipped, 0 failed" in text


def test_ingest_of_missing_path_or_unsupported_file_fails_after_the_rest(keyword_settings, library):
    out = StringIO()
    with pytest.raises(CommandError, match="2 of 3 documents failed"):
        call_command(
            "retrieval_ingest",
            str(library / "north.txt"),
            str(library / "picture.gif"),
            str(library / "absent.txt"),
            "--collection",
            "atlas",
            stdout=out,
        )
    text = out.getvalue()
    assert "failed   " + str(library / "absent.txt") + ": no such file or folder" in text
    assert "failed   picture.gif: No parser accepts picture.gif" in text
    assert Document.objects.get(external_id="north.txt").status == "indexed"


def test_a_file_that_cannot_be_read_fails_alone(tmp_path):
    from retrieval.management.commands.retrieval_ingest import read_sources

    (tmp_path / "kept.txt").write_text("north")
    (tmp_path / "folder.txt").mkdir()  # became a folder since it was listed
    listed = [(tmp_path / name, name) for name in ("gone.txt", "folder.txt", "kept.txt")]
    unreadable = []
    sources = list(read_sources(listed, {"k": "v"}, on_unreadable=unreadable.append))
    assert [(s.external_id, s.data, s.metadata) for s in sources] == [
        ("kept.txt", b"north", {"k": "v"})
    ]
    reasons = {r.external_id: (r.outcome, r.error) for r in unreadable}
    assert reasons == {
        "gone.txt": ("failed", "cannot read the file: No such file or directory"),
        "folder.txt": ("failed", "cannot read the file: Is a directory"),
    }


def test_ingest_refuses_bad_options(keyword_settings, library):
    with pytest.raises(CommandError, match="--metadata is not valid JSON"):
        run("retrieval_ingest", str(library), "--collection", "atlas", "--metadata", "{nope")
    with pytest.raises(CommandError, match="Unknown embedder 'missing'; configured: default"):
        run("retrieval_ingest", str(library), "--collection", "new", "--embedder", "missing")


def test_search_prints_ranked_chunks_and_json(keyword_settings, library):
    (library / "nested" / "corrupt.pdf").unlink()
    run("retrieval_ingest", str(library), "--collection", "atlas")
    text = run("retrieval_search", "north", "--collection", "atlas", "--top-k", "3")
    assert "3 results from 'atlas' (hybrid):" in text  # the default retriever
    dense = run("retrieval_search", "north", "--collection", "atlas", "--retriever", "dense")
    assert "results from 'atlas' (dense):" in dense and "1. 1.0000  " in dense
    results = json.loads(
        run(
            "retrieval_search",
            "up",
            "--collection",
            "atlas",
            "--top-k",
            "2",
            "--json",
            "--retriever",
            "dense",
        )
    )["results"]
    assert len(results) == 2
    required = {
        "rank",
        "score",
        "document",
        "title",
        "chunk_index",
        "start",
        "end",
        "page",
        "text",
        "metadata",
    }
    assert required <= set(results[0])
    top = results[0]
    assert top["rank"] == 1 and top["document"] == "library/nested/atlas.pdf" and top["page"] == 2
    assert top["text"] == "Up\n\nPage two looks up."
    document = Document.objects.get(external_id=top["document"])
    assert document.content[top["start"] : top["end"]] == top["text"]
    md = json.loads(
        run("retrieval_search", "east", "--collection", "atlas", "--top-k", "1", "--json")
    )["results"][0]
    assert md["page"] is None and md["document"] == "library/nested/east.md"


def test_search_errors_are_command_errors(keyword_settings, library):
    run("retrieval_ingest", str(library / "north.txt"), "--collection", "atlas")
    with pytest.raises(CommandError, match="No collection named 'nowhere'; existing: atlas"):
        run("retrieval_search", "north", "--collection", "nowhere")
    unknown = "Unknown retriever 'psychic'; configured: agentic, bm25, dense, graph, hybrid"
    with pytest.raises(CommandError, match=unknown):
        run("retrieval_search", "north", "--collection", "atlas", "--retriever", "psychic")
    with pytest.raises(CommandError, match="Unknown filter 'colour'"):
        run("retrieval_search", "north", "--collection", "atlas", "--filters", '{"colour": "red"}')
    with pytest.raises(CommandError, match="--top-k must be at least 1"):
        run("retrieval_search", "north", "--collection", "atlas", "--top-k", "0")


def _manage(*args: str):
    """Run manage.py in a child process against this test database."""
    return manage(*args, env={"DATABASE_URL": database_url(connection.settings_dict)})


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_commands_in_a_real_process_with_the_local_model(sample_docs):
    """The demo's path: default settings, the local embedder, exit codes as a shell sees them."""
    ingested = _manage("retrieval_ingest", str(sample_docs), "--collection", "handbook")
    assert ingested.returncode == 0, ingested.stderr + ingested.stdout
    assert ingested.stdout.count("indexed  sample_docs/") >= 5
    found = _manage(
        "retrieval_search", "How do I install the package?", "--collection", "handbook", "--json"
    )
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert results and any("pip install" in r["text"] for r in results)
    # Agentic retrieval runs offline (no LLM configured) and its JSON carries the rounds.
    agentic = _manage(
        "retrieval_search",
        "How do I install the package?",
        "--collection",
        "handbook",
        "--retriever",
        "agentic",
        "--json",
    )
    assert agentic.returncode == 0, agentic.stderr
    output = json.loads(agentic.stdout)
    rounds = [e for e in output["trace"]["events"] if e["stage"] == "agentic_round"]
    assert output["retriever"] == "agentic" and output["results"] and rounds
    assert {"query", "candidates", "selected", "verdict", "reason", "ms"} <= set(rounds[0])
    assert output["trace"]["llm_calls"] == []
    missing = _manage("retrieval_search", "anything", "--collection", "nope")
    assert missing.returncode == 1 and "No collection named 'nope'" in missing.stderr
