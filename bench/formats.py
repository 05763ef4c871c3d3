"""Same content, any format: what each format's reader gets back from it.

    python bench/formats.py [--sections retrieval ocr] [--set starlette] [--readers ours,...]
                            [--retrievers bm25,hybrid] [--formats docx,...] [--pages N] [--dpi DPI]
                            [--ocr-from pdfs|scifact|cranfield]

``retrieval``: a real-documents set (``realdocs.py``; Markdown or reStructuredText
sources) converted to DOCX, ODT, EPUB and PDF (``conversions.py``: pandoc, and pymupdf
typesetting pandoc's HTML as PDF), and that PDF scanned (``scan``: every page an image
at 300 dpi, which the app reads by OCR and the peers' PDF readers cannot read). Each
format is read by each reader into its own collection, chunked, embedded and indexed
the same way (the real-documents bench's default configuration) and asked the set's
questions by the same retrievers, so only the reader differs. The readers: the app's
parsers (``ours``: the files ingested as they are), LlamaIndex's
``SimpleDirectoryReader`` (llama-index-readers-file) and Haystack's converters
(``DOCXToDocument``, ``PyPDFToDocument``, ``MarkdownToDocument``,
``TextFileToDocument``), run in ``bench/.venv-peers`` (``peers.read_files``), whose
text goes through the app's chunker and index as a text file of the same path. Printed
per format and reader: files read and indexed, hit@5 and MRR@10
(``realdocs.hits_and_mrr``) and the difference of MRR@10 to the app reading the source
files, and seconds of reading per MB of the files read (the reader alone: no chunking,
no embedding; for ``scan``, OCR included).

``ocr``: the character error rate of OCR on scanned pages. With ``--ocr-from pdfs``
(the default), the first page of each of the first ``N`` PDFs of the set; with a
shared BEIR set, the first ``N`` documents (title and text), each typeset on an A4
page by pymupdf (11 pt Helvetica). The page is rendered at ``DPI`` as a scanner would
and put back as an image-only page, and the scanned PDF goes through the app's PDF
parser, which renders it again and reads it by OCR (the ``ocr`` extra). The reference
is the typeset page's own text layer. Printed per page and overall: CER (Levenshtein
distance / reference length, whitespace runs as one space), CER ignoring spaces (the
models' weak point is the gap between words, not the letters), and seconds of OCR per
page.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import ROOT, corpus_entries, table
from conversions import FORMATS

FONT_SIZE = 11
#: Characters of a document typeset on its page (a long abstract would overflow it).
PAGE_CHARS = 2000
READERS = ("ours", "llamaindex", "haystack")
#: What the peers' readers need beside bench/.venv-peers's packages (``realdocs.py``).
PEER_READER_PACKAGES = [
    "llama-index-readers-file",
    "docx2txt",
    "EbookLib",
    "html2text",
    "pypdf",
    "python-docx",
    "markdown-it-py",
    "mdit_plain",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sections", nargs="+", default=["retrieval", "ocr"], choices=["retrieval", "ocr"]
    )
    parser.add_argument("--set", default="starlette", help="A real-documents set.")
    parser.add_argument("--readers", default=",".join(READERS), help="Comma-separated.")
    parser.add_argument("--retrievers", default="bm25,hybrid", help="Comma-separated.")
    parser.add_argument(
        "--formats", default=",".join(FORMATS), help="Comma-separated; the source is always read."
    )
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--dpi", type=int, default=300, help="resolution of the scans")
    parser.add_argument("--ocr-from", default="pdfs", choices=["pdfs", "scifact", "cranfield"])
    parser.add_argument("--peer-read", help=argparse.SUPPRESS)  # the child process's role
    args = parser.parse_args()
    if args.peer_read:
        print(json.dumps(peer_texts(args.peer_read, args.set, args.formats.split(","))))
        return
    if "retrieval" in args.sections:
        from common import machine, setup_django

        setup_django()
        print(f"Machine: {machine()}\n")
        same_content(
            args.set, args.readers.split(","), args.retrievers.split(","), args.formats.split(",")
        )
    else:
        _settings()
    if "ocr" in args.sections:
        if args.ocr_from == "pdfs":
            ocr_pdf_pages(args.set, args.pages, args.dpi)
        else:
            ocr_cer(args.ocr_from, args.pages, args.dpi)


def _settings() -> None:
    """Django settings enough for the parsers (no database: nothing is ingested)."""
    import django
    from django.conf import settings

    sys.path.insert(0, str(ROOT))  # this checkout's app, not an installed one
    settings.configure(INSTALLED_APPS=["retrieval"], USE_TZ=True)
    django.setup()


def same_content(name: str, readers: list[str], retrievers: list[str], formats: list[str]) -> None:
    """Print each format's and reader's scores on set ``name``, beside the source's."""
    from conversions import converted
    from django.test.utils import override_settings
    from realdocs import DocSet, app_settings

    docset = DocSet(name)
    docs = docset.documents_folder()
    questions = docset.load_questions()
    sources = docset.files(docs)
    header = f"{docset.label} documentation"
    files = {"source": sources}
    files.update({fmt: converted(name, fmt, sources, docs, header=header) for fmt in formats})
    ids = [source.relative_to(docs.parent).as_posix() for source in sources]
    peers = {reader: peer_process(reader, name, formats) for reader in readers if reader != "ours"}
    print(f"{name}: {docset.label}, {len(sources)} files, {len(questions)} questions\n")
    rows, baseline = [], {}
    with override_settings(RETRIEVAL=app_settings("default")):
        for fmt, paths in files.items():
            for reader in readers:
                if reader == "ours":
                    texts, sources_read = _our_reading(paths, ids)
                elif fmt in peers[reader]:
                    texts, sources_read = _peer_reading(peers[reader][fmt], paths, ids)
                else:
                    rows.append([fmt, reader, "no reader"] + [""] * (3 + 2 * len(retrievers)))
                    continue
                label = paths[0].suffix if fmt == "source" else fmt
                collection, failed = _ingest(f"formats-{name}-{fmt}-{reader}", sources_read)
                row = [label, reader, f"{len(sources_read) - failed}/{len(paths)}"]
                row += [sum(len(t) for t, _, _ in texts.values()), *_speed(texts.values())]
                for leg in retrievers:
                    hits, mrr = _scores(collection, leg, questions, docs)
                    baseline.setdefault(leg, mrr)  # the first row: ours on the source
                    row += [f"{hits} / {mrr:.3f}", f"{mrr - baseline[leg]:+.3f}"]
                rows.append(row)
                print(f"{fmt} {reader}: done", file=sys.stderr)
    headers = ["format", "reader", "files read", "characters", "MB", "read s/MB"]
    for leg in retrievers:
        headers += [f"{leg} hit@5 / MRR@10", "Δ MRR@10"]
    print(f"## Same content, any format: {name} ({docset.label}, {len(questions)} questions)\n")
    print(table(headers, rows), flush=True)


def _our_reading(paths: list[Path], ids: list[str]) -> tuple[dict, list]:
    """Read each file with the app's parser (timed); return the texts and the sources."""
    from retrieval.services.ingestion.ingest import Source
    from retrieval.services.ingestion.parsing import parser_for

    texts, sources = {}, []
    for path, external_id in zip(paths, ids, strict=True):
        data = path.read_bytes()
        started = time.perf_counter()
        text = parser_for(filename=path.name, data=data).parse(data, filename=path.name).text
        texts[external_id] = (text, time.perf_counter() - started, len(data))
        sources.append(Source.from_path(path, external_id=external_id))
    return texts, sources


def _peer_reading(read: dict[str, dict], paths: list[Path], ids: list[str]) -> tuple[dict, list]:
    """A peer's texts of the files it read, and each as a text file of the same path."""
    from retrieval.services.ingestion.ingest import Source

    texts, sources = {}, []
    for path, external_id in zip(paths, ids, strict=True):
        entry = read.get(external_id, {})
        if "text" not in entry:
            print(f"{path.name}: {entry.get('error', 'not read')}", file=sys.stderr)
            continue
        # pypdf gives an emoji font's glyph as NUL, which PostgreSQL's text cannot hold.
        text = entry["text"].replace("\x00", "")
        texts[external_id] = (text, entry["seconds"], path.stat().st_size)
        # The file's name and path as ours get them, so that only the text differs.
        sources.append(
            Source(
                external_id=external_id,
                data=text.encode("utf-8"),
                filename=f"{path.stem}.txt",
                mime_type="text/plain",
                source_path=str(path),
            )
        )
    return texts, sources


def _speed(texts) -> list:
    """Return the MB read and the seconds of reading per MB."""
    seconds = sum(s for _, s, _ in texts)
    megabytes = sum(size for _, _, size in texts) / 1e6
    return [f"{megabytes:.2f}", f"{seconds / megabytes:.2f}" if megabytes else ""]


def _ingest(name: str, sources: list):
    """Index ``sources`` alone into collection ``name`` (the set's default configuration);
    return the collection and the number of sources that failed."""
    from retrieval.models import Document
    from retrieval.services.ingestion.collections import get_or_create_collection
    from retrieval.services.ingestion.ingest import ingest

    collection, _ = get_or_create_collection(name, chunker="realdocs", embedder="realdocs")
    Document.objects.filter(collection=collection).delete()  # a file an earlier run read
    run = ingest(collection, sources, force=True)
    for error in run.errors:
        print(f"{name}: {error}", file=sys.stderr)
    return collection, run.documents_failed


def _scores(collection, leg: str, questions: list[dict], docs: Path) -> tuple[int, float]:
    from realdocs import DEPTH, file_ranking, hits_and_mrr

    from retrieval.services.access import Scope
    from retrieval.services.query.search import search

    rankings = [
        file_ranking(
            (r.chunk.document.external_id
             for r in search(q["question"], collection=collection, retriever=leg, top_k=DEPTH,
                             scope=Scope.ALL)),
            docs,
        )
        for q in questions
    ]  # fmt: skip
    return hits_and_mrr(rankings, questions)


def peer_process(reader: str, name: str, formats: list[str]) -> dict[str, dict[str, dict]]:
    """Run a peer's reader on the set's files in bench/.venv-peers; return its texts."""
    from realdocs import PEERS_VENV, ensure_peers_venv, run_in_peers_venv

    ensure_peers_venv()
    python = str(PEERS_VENV / "bin" / "python")
    probe = (
        "import llama_index.readers.file, docx2txt, ebooklib, html2text, pypdf, docx, mdit_plain"
    )
    if subprocess.run([python, "-c", probe], capture_output=True).returncode:
        subprocess.run([python, "-m", "pip", "install", "-q", *PEER_READER_PACKAGES], check=True)
    return run_in_peers_venv(
        __file__, "--set", name, "--formats", ",".join(formats), "--peer-read", reader
    )


def peer_texts(reader: str, name: str, formats: list[str]) -> dict[str, dict[str, dict]]:
    """In bench/.venv-peers: a peer's text of each file it has a reader for, by format."""
    from conversions import target
    from peers import PEER_READERS, read_files
    from realdocs import DocSet

    docset = DocSet(name)
    docs = docset.documents_folder()
    sources = docset.files(docs)
    ids = {source: source.relative_to(docs.parent).as_posix() for source in sources}
    found: dict[str, dict[str, dict]] = {}
    for fmt in ("source", *formats):
        paths = {
            (source if fmt == "source" else target(name, fmt, source, docs)): ids[source]
            for source in sources
        }
        if all(path.suffix in PEER_READERS[reader] for path in paths):
            read = read_files(reader, list(paths))
            found[fmt] = {external_id: read[str(path)] for path, external_id in paths.items()}
    return found


def ocr_pdf_pages(name: str, pages: int, dpi: int) -> None:
    """Print OCR's character error rate on the first pages of the set's PDFs, scanned."""
    from conversions import converted, scanned
    from realdocs import DocSet

    docset = DocSet(name)
    docs = docset.documents_folder()
    header = f"{docset.label} documentation"
    pdfs = converted(name, "pdf", docset.files(docs), docs, header=header)[:pages]
    scans = [(pdf.stem, *scanned(pdf.read_bytes(), 0, dpi)) for pdf in pdfs]
    print(f"## OCR on the first page of {len(scans)} {name} PDFs, scanned at {dpi} dpi\n")
    print(_ocr_table(scans))


def ocr_cer(dataset: str, pages: int, dpi: int) -> None:
    """Print OCR's character error rate on pages typeset from ``dataset`` and scanned."""
    entries = [e for e in corpus_entries(dataset) if e.get("text")][:pages]
    scans = []
    for entry in entries:
        text = f"{entry.get('title', '')}\n\n{entry['text']}"[:PAGE_CHARS].rsplit(" ", 1)[0]
        scans.append((entry["_id"], *_scanned_page(text, dpi)))
    typeset = f"typeset at {FONT_SIZE} pt, scanned at {dpi} dpi"
    print(f"## OCR on {len(entries)} {dataset} pages {typeset}\n")
    print(_ocr_table(scans))


def _ocr_table(scans: list[tuple[str, str, bytes]]) -> str:
    """Read each scan (label, reference text, image-only PDF) by OCR; tabulate the CER."""
    from retrieval.services.parsers.pdf import PdfParser

    rows, totals = [], [0, 0, 0, 0]
    seconds = []
    for label, reference, scan in scans:
        started = time.perf_counter()
        read = PdfParser().parse(scan, filename="scan.pdf").text
        seconds.append(time.perf_counter() - started)
        errors, length = distance(_flat(read), _flat(reference)), len(_flat(reference))
        tight = distance(_tight(read), _tight(reference)), len(_tight(reference))
        totals = [
            totals[0] + errors,
            totals[1] + length,
            totals[2] + tight[0],
            totals[3] + tight[1],
        ]
        rows.append(
            [
                label,
                length,
                f"{errors / length:.2%}",
                f"{tight[0] / tight[1]:.2%}",
                f"{seconds[-1]:.1f}",
            ]
        )
    rows.append(
        [
            "all",
            totals[1],
            f"{totals[0] / totals[1]:.2%}",
            f"{totals[2] / totals[3]:.2%}",
            f"{statistics.median(seconds):.1f} (median)",
        ]
    )
    return table(["document", "characters", "CER", "CER, spaces ignored", "OCR s/page"], rows)


def _scanned_page(text: str, dpi: int) -> tuple[str, bytes]:
    """Return a typeset A4 page's text layer, and the page scanned: an image-only PDF."""
    import pymupdf
    from conversions import scanned

    with pymupdf.open() as typeset:
        page = typeset.new_page(width=595, height=842)
        page.insert_textbox(page.rect + (56, 56, -56, -56), text, fontsize=FONT_SIZE)
        return scanned(typeset.tobytes(), 0, dpi)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _tight(text: str) -> str:
    return "".join(text.split())


def distance(a: str, b: str) -> int:
    """Return the Levenshtein distance between ``a`` and ``b`` (one row at a time)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, start=1):
        current = [i]
        for j, other in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            )
        previous = current
    return previous[-1]


if __name__ == "__main__":
    main()
