"""The ``RETRIEVAL`` setting: defaults, and one lazily resolved settings object.

A site writes ``RETRIEVAL = {...}`` in its settings; anything it leaves out comes
from :data:`DEFAULTS`. Component dicts (``PARSERS``, ``EMBEDDERS`` ...) are merged
per alias, so a site can add one retriever without restating the others.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed

#: Component kinds: each maps alias -> {"BACKEND": dotted path, "OPTIONS": {...}}.
COMPONENT_KINDS = (
    "PARSERS",
    "CHUNKERS",
    "EMBEDDERS",
    "ANALYZERS",
    "RETRIEVERS",
    "LLMS",
    "REWRITERS",
    "RERANKERS",
    "EXTRACTORS",
    "INDEXES",
    "QUEUES",
)

DEFAULTS: dict[str, Any] = {
    # File readers, tried in this order: the first whose MIME types or extensions match.
    "PARSERS": {
        "pdf": {"BACKEND": "retrieval.services.parsers.pdf.PdfParser"},
        "markdown": {"BACKEND": "retrieval.services.parsers.markdown.MarkdownParser"},
        "html": {"BACKEND": "retrieval.services.parsers.html.HtmlParser"},
        "json": {"BACKEND": "retrieval.services.parsers.json.JsonParser"},
        "csv": {"BACKEND": "retrieval.services.parsers.spreadsheet.CsvParser"},
        # These need the office extra; without it such a file is refused naming the extra.
        "xlsx": {"BACKEND": "retrieval.services.parsers.spreadsheet.XlsxParser"},
        "docx": {"BACKEND": "retrieval.services.parsers.word.DocxParser"},
        "pptx": {"BACKEND": "retrieval.services.parsers.powerpoint.PptxParser"},
        "odt": {"BACKEND": "retrieval.services.parsers.opendocument.OdtParser"},
        "odp": {"BACKEND": "retrieval.services.parsers.opendocument.OdpParser"},
        "ods": {"BACKEND": "retrieval.services.parsers.opendocument.OdsParser"},
        # EPUB books need the ebook extra (defusedxml); without it an .epub file is refused.
        "epub": {"BACKEND": "retrieval.services.parsers.ebook.EpubParser"},
        # E-mail (.eml) needs only the standard library.
        "eml": {"BACKEND": "retrieval.services.parsers.email.EmailParser"},
        # Outlook .msg needs the email extra (olefile); other OLE2 files are refused by it.
        "msg": {"BACKEND": "retrieval.services.parsers.outlook.OutlookMsgParser"},
        # Images read by OCR: needs the ocr extra, else an image is refused naming it.
        "image": {"BACKEND": "retrieval.services.parsers.image.ImageParser"},
        "rst": {"BACKEND": "retrieval.services.parsers.rst.RstParser"},
        "text": {"BACKEND": "retrieval.services.parsers.text.TextParser"},
    },
    # How documents are split into chunks; DEFAULT_CHUNKER names the one new documents get.
    "CHUNKERS": {
        "default": {
            "BACKEND": "retrieval.services.chunkers.recursive.RecursiveChunker",
            "OPTIONS": {"max_tokens": 256},
        },
        "character": {"BACKEND": "retrieval.services.chunkers.character.CharacterChunker"},
        "paragraph": {"BACKEND": "retrieval.services.chunkers.paragraph.ParagraphChunker"},
        "token": {"BACKEND": "retrieval.services.chunkers.token.TokenChunker"},
        "whole": {"BACKEND": "retrieval.services.chunkers.whole.WholeChunker"},
    },
    # Text to vectors; a collection keeps the alias (and dimension) it was created with.
    # "default" is all-MiniLM-L6-v2 on the CPU (the local extra), no key, no network.
    "EMBEDDERS": {
        "default": {"BACKEND": "retrieval.services.embedders.local.LocalEmbedder"},
    },
    # Where each collection's vectors are ranked (Collection.index names an alias). "default"
    # is pgvector in the site's database; external engines (Milvus, Chroma) are optional.
    "INDEXES": {
        "default": {"BACKEND": "retrieval.services.indexes.pgvector.PgvectorIndex"},
    },
    # Text analysis for BM25, applied at indexing and at query time alike: changing
    # "default" needs the collection's sparse index rebuilt.
    "ANALYZERS": {
        "default": {
            "BACKEND": "retrieval.services.sparse.analyzer.Analyzer",
            "OPTIONS": {"language": "english", "stopwords": "english"},
        },
    },
    # Rankers a search names (or its collection's, or DEFAULT_RETRIEVER).
    "RETRIEVERS": {
        "dense": {"BACKEND": "retrieval.services.retrievers.dense.DenseRetriever"},
        "bm25": {
            "BACKEND": "retrieval.services.retrievers.bm25.BM25Retriever",
            "OPTIONS": {"k1": 1.2, "b": 0.75},
        },
        "hybrid": {
            "BACKEND": "retrieval.services.retrievers.hybrid.HybridRetriever",
            "OPTIONS": {"retrievers": {"bm25": 1.0, "dense": 1.0}},
        },
        # Rewrite -> retrieve -> judge rounds; LLM stages when LLMS has "default",
        # offline ones (pseudo-relevance feedback, coverage judge) otherwise.
        "agentic": {
            "BACKEND": "retrieval.services.agentic.retriever.AgenticRetriever",
            "OPTIONS": {"retriever": "hybrid", "llm": "default"},
        },
        # Expands another retriever's hits along knowledge-graph triples; with no
        # "retriever" option it wraps the collection's default retriever.
        "graph": {
            "BACKEND": "retrieval.services.retrievers.graph.GraphRetriever",
            "OPTIONS": {"beam_width": 3, "max_hops": 2, "hop_decay": 0.8},
        },
    },
    # Knowledge-graph triple extractors; "default" needs no key (the "graph" extra).
    "EXTRACTORS": {
        "default": {"BACKEND": "retrieval.services.extractors.syntactic.SpacyTripleExtractor"},
    },
    # Chat models: {"BACKEND": ..., "OPTIONS": {"model", "base_url", "api_key", ...}}, or
    # the short form "openai:MODEL". None by default: every LLM stage has an offline path.
    "LLMS": {},
    # Query rewriters a search or pipeline may name; "prf" (RM3 pseudo-relevance feedback)
    # needs no LLM.
    "REWRITERS": {
        "prf": {"BACKEND": "retrieval.services.rewriters.prf.RM3QueryRewriter"},
    },
    # Rerankers a search or pipeline may name (cross-encoder, rerank API, LLM); none by default.
    "RERANKERS": {},
    # Named pipelines (see retrieval.services.query.pipelines): rewrite -> retrievers -> fusion ->
    # rerank, each step naming a component above. "default" is the collection's retriever.
    "PIPELINES": {"default": {}},
    # Alias of the pipeline used when neither the call nor the collection names one.
    "DEFAULT_PIPELINE": "default",
    # How ranked lists are fused where a hybrid retriever or a pipeline does not say:
    # "relative_score" (min-max per list, weighted sum; chosen by bench/fusion.py), "rrf",
    # "relative_to_best" or "dbsf"; k is RRF's constant. document_floor: each document's
    # leading candidate gets from each list at least this share of the list's best for the
    # document (0: off; chosen by bench/realdocs.py over four documentation sets).
    "FUSION": {"method": "relative_score", "k": 60, "document_floor": 0.8},
    # Seconds one search may wait on remote services (the query's embedding, an external
    # index, a rerank API, LLM calls): each call's timeout is cut to what is left of them,
    # no retry starts past them, and a call with none left fails as unavailable (a hybrid
    # or pipeline answers from its other legs). Counted from the search's start; local
    # work (a local model, PostgreSQL) is not interrupted but counts. None: no deadline.
    "SEARCH_DEADLINE": 30.0,
    # The most LLM work one query may do; None lifts a limit. max_seconds bounds the LLM
    # calls only (none is sent, or runs, past that many seconds from the search's start);
    # None leaves them all of SEARCH_DEADLINE.
    "LLM_BUDGET": {"max_calls": 12, "max_tokens": 24000, "max_seconds": None},
    # Grounded answers (retrieval.answer, POST /api/answer/, retrieval_ask): the LLMS alias
    # that writes them (not configured: the extractive answer, no model), results retrieved,
    # the passages' token budget (then fitted to the LLM's context_window, beside the LLM's
    # own max_tokens for the answer), the score a result needs to be used (None: any), and
    # the sentences of an extractive answer. min_coverage: the extractive answer abstains
    # when its sentences cover less than this share of the question's terms, each weighted
    # by its IDF among the passages' sentences (a term none has weighs most); None: never.
    # Chosen by bench/answers.py --sweep on the mean over real document sets (bench/README.md).
    # Keys left out keep these values.
    "ANSWERS": {
        "llm": "default",
        "top_k": 8,
        "context_tokens": 2000,
        "min_score": None,
        "min_coverage": 0.25,
        "sentences": 3,
    },
    # Alias of the chunker used for new documents.
    "DEFAULT_CHUNKER": "default",
    # Alias of the embedder given to collections created without one.
    "DEFAULT_EMBEDDER": "default",
    # Alias of the retriever used when neither the call nor the collection names one.
    "DEFAULT_RETRIEVER": "hybrid",
    # Alias of the extractor retrieval_extract_graph uses when none is named.
    "DEFAULT_EXTRACTOR": "default",
    # What is embedded and BM25-indexed for a chunk: its content after a header with the
    # document's title, its opening sentence (in the chunks that do not hold it), the
    # chunk's heading path, these metadata keys' values and the path of the file it was
    # read from, as words (services.core.headers). None: the content alone.
    # Changing it needs a reindex.
    "CHUNK_CONTEXT": {
        "title": True,
        "headings": True,
        "metadata_keys": [],
        "source": True,
        "summary": True,
    },
    # Split a chunk whose header and text are longer than the embedder reads (its
    # max_input_tokens, e.g. 256 word pieces), so that no text goes unembedded.
    "FIT_EMBEDDER_WINDOW": True,
    # Texts sent to the embedder in one call during ingestion.
    "EMBED_BATCH_SIZE": 32,
    # tiktoken encoding used to count a chunk's tokens.
    "TOKEN_ENCODING": "cl100k_base",
    # Largest file the API accepts (bytes); larger uploads get 413.
    "MAX_UPLOAD_BYTES": 20 * 1024 * 1024,
    # Most pages a PDF may have; a longer one fails to parse, naming this limit.
    "MAX_PDF_PAGES": 2000,
    # Most bytes a PDF's streams (page contents, forms, fonts; images and attachments
    # aside) may decode to, and drawing its pages may interpret (a form each time it is
    # drawn); both counted before any page is read, since MuPDF cannot be interrupted
    # inside a page. Dense text operators cost about 0.2 s per MB to read.
    "MAX_PDF_DECOMPRESSED_BYTES": 64 * 1024 * 1024,
    # Seconds parsing one file may take, checked between PDF pages; past it the file fails.
    "MAX_PARSE_SECONDS": 60,
    # Most sheets a workbook may have, and most cells (rows × columns, all sheets together)
    # a spreadsheet or CSV file may hold: checked from each sheet's declared dimension
    # before it is read, and while reading. Past either the file fails, naming the limit.
    "MAX_SHEETS": 100,
    "MAX_TABLE_CELLS": 1_000_000,  # rows × columns, all sheets together
    # Most slides a presentation (.pptx, .odp) may have: counted from its list of slides
    # before any slide is read; past it the file fails, naming the limit.
    "MAX_SLIDES": 1000,
    # A golden-set zip imported in the admin, or an .xlsx workbook: most members it may
    # list, most bytes the members read from it may expand to, and the highest ratio of a
    # member's size to its compressed size (zip bombs reach thousands; text about 10 times).
    "MAX_ARCHIVE_MEMBERS": 1000,
    "MAX_ARCHIVE_BYTES": 64 * 1024 * 1024,  # the members read, expanded
    "MAX_ARCHIVE_RATIO": 100,  # a member's size to its compressed size
    # An e-mail message: most MIME parts walked (attachments, inline parts), and most
    # levels of messages forwarded whole inside messages. Past either the file fails.
    "MAX_EMAIL_PARTS": 100,  # MIME parts walked
    "MAX_EMAIL_DEPTH": 5,  # messages forwarded inside messages
    # OCR (the ocr extra): most pixels an image may have, checked from its header before it
    # is decoded (an image, a TIFF page, an image on a scanned PDF page); most images or
    # scanned pages one file may send to OCR, counted before the first is read; seconds
    # OCR may take per file, checked between pages. Past any, the file fails naming it.
    "MAX_IMAGE_PIXELS": 50_000_000,  # pixels of one image, from its header
    "MAX_OCR_PAGES": 100,  # images or scanned pages one file may send to OCR
    "MAX_OCR_SECONDS": 600,  # seconds of OCR per file, checked between pages
    # Deepest nesting of JSON objects and arrays in metadata, search filters and tool
    # arguments; an API request body may nest two levels more (its own object, and the
    # filters object around their metadata). Deeper is refused with a message naming it.
    "MAX_JSON_DEPTH": 20,
    # Threads running the queries of one batch search at once.
    "BATCH_SEARCH_WORKERS": 4,
    # Most queries the API accepts in one batch search; more get 400.
    "MAX_BATCH_QUERIES": 32,
    # Dotted path to a function (user) -> QuerySet[Collection] | Iterable[name or slug] | None
    # (None: all) naming the collections a user may see; unset, everyone sees all.
    "COLLECTION_ACCESS": None,
    # Dotted path to a function (user) -> QuerySet[Collection] | Iterable[name or slug] | None
    # naming the collections a user may change (None: those they may see). Writes also
    # need Django's model permission and seeing every document of the collection.
    "COLLECTION_WRITE_ACCESS": None,
    # Dotted path to a function (user) -> Q on Document | QuerySet[Document] | None (None:
    # every document of the visible collections) restricting every search leg, tool and
    # graph walk to the documents a user may see; unset, no document restriction.
    "DOCUMENT_ACCESS": None,
    # The metadata keys of a collection the hooks above decide by (e.g. ["team"]): once a
    # hook is set, changing them (or a name or slug) needs the permission
    # retrieval.change_collection_access. None: every key, as any may be read.
    "COLLECTION_ACCESS_KEYS": None,
    # Wagtail sites (retrieval.contrib.wagtail in INSTALLED_APPS): the collection live
    # pages are indexed into; the page types indexed ("app_label.Model" names; None:
    # every page type but Page itself); who may find password-protected pages in search
    # ("nobody", or "signed-in" / "public" if the site says so).
    "WAGTAIL_COLLECTION": "pages",
    "WAGTAIL_PAGE_MODELS": None,  # the page types indexed
    "WAGTAIL_PASSWORD_PAGES": "nobody",  # who finds password-protected pages
    # The plain search page (retrieval.urls) requires a signed-in user unless this is
    # True; it always lists and searches only what the visitor may see.
    "SEARCH_PAGE_PUBLIC": False,
    # Documents per page of the search page's results (each with its matching chunks).
    "SEARCH_PAGE_SIZE": 10,
    # Document metadata keys the search page offers as facets (string values, or strings
    # in lists), each value with its count of the documents the reader may see.
    "SEARCH_PAGE_FACETS": [],
    # Whether the search page offers a grounded answer above the results (on request: a
    # link asks for it, so no search costs a model call unasked; see ANSWERS).
    "SEARCH_PAGE_ANSWERS": True,
    # DATABASES alias (a read replica) that ranking and loading chunks read from; writes
    # stay on the primary. None: the alias Django's router picks for reads.
    "SEARCH_DATABASE": None,
    # Where background work (indexing, evaluation, the index outbox) runs: "default" is
    # django-q2's workers; "retrieval.services.queues.tasks_framework.TasksFrameworkQueue"
    # hands it to Django's Tasks framework (any backend the site's TASKS names).
    "QUEUES": {
        "default": {"BACKEND": "retrieval.services.queues.q2.DjangoQ2Queue"},
    },
    # Run background work inline (True) or on the queue's workers (False); None picks
    # the workers when the queue's library is installed, inline otherwise.
    "TASKS_SYNC": None,
    # A running IndexRun whose worker has shown no progress for this many seconds is
    # taken for dead (killed, out of memory), marked failed and resumed once on the queue.
    "RUN_HEARTBEAT_TIMEOUT": 300,
    # Share of searches kept as QueryTrace rows (0 none, 1 every one), on every face.
    "TRACE_SAMPLE_RATE": 0.0,
    # Traces older than this many days are deleted by retrieval_prune_traces.
    "TRACE_RETENTION_DAYS": 30,
    # A trace slower than this many milliseconds is "slow" in the admin's filter.
    "TRACE_SLOW_MS": 1000,
    # Editors' relevance tools (docs/guides/relevance.md). Seconds a collection's synonyms
    # stay in Django's cache (a change replaces them at once in a shared cache; a
    # per-process cache's other processes see it within this time).
    "SYNONYMS_CACHE_TIMEOUT": 300,
    # Query suggestions (/api/suggest/), from readers' searches that found something.
    "SUGGEST_MIN_USERS": 3,  # distinct signed-in users before a query is offered to others
    "SUGGEST_LIMIT": 8,  # the most suggestions returned
    "SUGGEST_MIN_PREFIX": 2,  # the shortest prefix answered
    "SUGGEST_DAYS": 90,  # days of traces read
}


class RetrievalSettings:
    """``RETRIEVAL`` merged over :data:`DEFAULTS`, resolved on first use and cached."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] | None = None

    def _resolve(self) -> dict[str, Any]:
        from django.conf import settings

        user: dict[str, Any] = getattr(settings, "RETRIEVAL", {}) or {}
        merged = {key: value for key, value in DEFAULTS.items()}
        for key, value in user.items():
            if key in (*COMPONENT_KINDS, "PIPELINES"):
                merged[key] = {**DEFAULTS.get(key, {}), **value}
            else:
                merged[key] = value
        return merged

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._cache is None:
            self._cache = self._resolve()
        try:
            return self._cache[name]
        except KeyError:
            raise AttributeError(f"Unknown RETRIEVAL setting {name!r}") from None

    def reload(self) -> None:
        """Forget the cached values (and every component built from them)."""
        self._cache = None
        from .services.registry import reset_components

        reset_components()

    def connect_reload(self) -> None:
        setting_changed.connect(_reload_on_change, dispatch_uid="retrieval_settings_reload")


def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "RETRIEVAL":
        retrieval_settings.reload()


retrieval_settings = RetrievalSettings()
