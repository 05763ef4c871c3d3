"""The app's tables: collections, documents, chunks, triples, indexing runs, promotions.

Models stay thin: fields, managers, ``Meta``, ``__str__``. Indexing and retrieval
logic lives in :mod:`retrieval.services`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from pgvector.django import VectorField

from .models_relevance import QueryRule
from .validation.storable import validate_storable_metadata


class Collection(models.Model):
    """A named corpus with its own embedding space, default retriever and pipeline."""

    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    embedder = models.CharField(
        max_length=100, help_text="Alias of the embedder in RETRIEVAL['EMBEDDERS']."
    )
    model_name = models.CharField(max_length=200, blank=True)
    dimensions = models.PositiveIntegerField()
    chunker = models.CharField(
        max_length=100, blank=True, help_text="Chunker alias; blank uses DEFAULT_CHUNKER."
    )
    default_retriever = models.CharField(
        max_length=100, blank=True, help_text="Retriever alias; blank uses DEFAULT_RETRIEVER."
    )
    default_pipeline = models.CharField(
        max_length=100, blank=True, help_text="Pipeline alias; blank uses DEFAULT_PIPELINE."
    )
    index = models.CharField(
        max_length=100,
        default="default",
        help_text="Alias of the vector index in RETRIEVAL['INDEXES']; set at creation.",
    )
    # Set at creation from the index: outside PostgreSQL, so a trigger records every
    # chunk write and delete in the outbox (IndexOperation, migration 0007).
    external_index = models.BooleanField(default=False, editable=False)
    # An external index's active space (engine collection name); a rebuild fills a new
    # space and switches this name in one UPDATE.
    index_space = models.CharField(max_length=200, blank=True, editable=False)
    # Scopes with an HNSW index of their own in pgvector (``{"access": token}`` or
    # ``{"metadata": {...}}``), declared with ``retrieval_scope_index``: a search under a
    # narrow scope walks its graph instead of scanning the scope's rows.
    scope_indexes = models.JSONField(default=list, blank=True, editable=False)
    metadata = models.JSONField(default=dict, blank=True, validators=[validate_storable_metadata])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            # Its name, slug and metadata are what the access hooks decide by: changing
            # them changes who sees the collection (retrieval.services.access).
            ("change_collection_access", "Can change what decides who sees a collection"),
        ]

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One source document of a collection, with its parsed text."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        INDEXING = "indexing", "Indexing"
        INDEXED = "indexed", "Indexed"
        FAILED = "failed", "Failed"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    external_id = models.CharField(
        max_length=1000, help_text="Stable id within the collection: a path, URL or key."
    )
    title = models.CharField(max_length=1000, blank=True)
    source_path = models.CharField(
        max_length=2000, blank=True, help_text="File path or URL the content was read from."
    )
    source_file = models.FileField(upload_to="retrieval/sources/%Y/%m/", blank=True)
    mime_type = models.CharField(max_length=200, blank=True)
    content = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    metadata = models.JSONField(default=dict, blank=True, validators=[validate_storable_metadata])
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    # Who may see it, decided by its host object (services.visibility): a JSON list of
    # any of "public", "signed-in", "group:<pk>", "user:<pk>"; empty: nobody; null: the
    # host says nothing. JSON, not an ArrayField: a site need not install
    # django.contrib.postgres (Django 6.1 checks that for ArrayField and GinIndex).
    access = models.JSONField(
        null=True,
        blank=True,
        help_text="Who may see it, from its host object (null: no restriction of the host's).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["collection", "external_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "external_id"], name="retrieval_document_unique_external_id"
            )
        ]
        indexes = [
            models.Index(fields=["collection", "status"], name="retrieval_doc_status_idx"),
            # `access ?| ARRAY[the user's tokens]` on every search leg uses a GIN index
            # created in SQL by migration 0021; the partial index answers "is any document
            # restricted?" before a scope adds the condition.
            models.Index(
                fields=["collection"],
                condition=models.Q(access__isnull=False),
                name="retrieval_doc_restricted_idx",
            ),
            # The other half of that condition, `access IS NULL` (GIN indexes no NULLs):
            # with both, a narrow scope's documents come from a BitmapOr of two index
            # scans instead of reading every document.
            models.Index(
                fields=["collection"],
                condition=models.Q(access__isnull=True),
                name="retrieval_doc_unrestricted_idx",
            ),
        ]
        # The GIN (jsonb_path_ops) indexes on metadata are created in SQL by migration 0001.

    def __str__(self) -> str:
        return self.title or self.external_id


def indexed_text(prefix: str, content: str) -> str:
    """Return the text embedded and BM25-indexed for a chunk: header, blank line, content."""
    return f"{prefix}\n\n{content}" if prefix else content


class Chunk(models.Model):
    """A span of a document's content with its embedding.

    ``content == document.content[start:end]`` always holds. ``collection`` repeats
    the document's collection so each collection can have its own partial HNSW
    index (an index predicate cannot follow a join).
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="chunks")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    content = models.TextField()
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    page = models.PositiveIntegerField(null=True, blank=True, help_text="1-based page, if paged.")
    heading_path = models.JSONField(default=list, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    # The header (title, heading path, chosen metadata) put before ``content`` when the
    # chunk was embedded and BM25-indexed (services.chunk_context); "" for none.
    indexed_prefix = models.TextField(blank=True, default="", editable=False)
    # No fixed dimension: collections of different dimensions share the table,
    # each indexed by a partial expression index over ``embedding::vector(n)``.
    embedding = VectorField(null=True, blank=True)
    # A re-embedding's new vectors, built beside ``embedding`` and swapped in at once
    # when the whole collection has them (services.reembedding).
    embedding_next = VectorField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["document", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["document", "index"], name="retrieval_chunk_unique_index"
            )
        ]
        # Its metadata GIN index and per-collection HNSW indexes are created in SQL
        # (migration 0001, services.collections.ensure_vector_index).

    def __str__(self) -> str:
        return f"{self.document} #{self.index}"

    @property
    def indexed_text(self) -> str:
        """Return the text that was embedded and BM25-indexed: header, blank line, content."""
        return indexed_text(self.indexed_prefix, self.content)


class Triple(models.Model):
    """A knowledge-graph edge ``subject --predicate--> object`` from one chunk."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="triples")
    chunk = models.ForeignKey(
        Chunk, on_delete=models.CASCADE, related_name="triples", null=True, blank=True
    )
    subject = models.CharField(max_length=500)
    predicate = models.CharField(max_length=200)
    object = models.CharField(max_length=500)
    subject_key = models.CharField(max_length=500)
    predicate_key = models.CharField(max_length=200)
    object_key = models.CharField(max_length=500)
    confidence = models.FloatField(default=1.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["subject_key", "predicate_key", "object_key"]
        indexes = [
            models.Index(fields=["collection", "subject_key"], name="retrieval_triple_subject_idx"),
            models.Index(fields=["collection", "object_key"], name="retrieval_triple_object_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} —{self.predicate}→ {self.object}"


class Entity(models.Model):
    """A knowledge-graph node: a normalised key, its display text and merged aliases.

    Triples name entities by key; an entity exists in the graph while some triple
    mentions its key. ``aliases`` lists keys merged into this one: extraction
    writes them as this key.
    """

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="entities")
    key = models.CharField(max_length=500)
    display = models.CharField(max_length=500)
    aliases = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["key"]
        verbose_name_plural = "entities"
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "key"], name="retrieval_entity_unique_key"
            )
        ]

    def __str__(self) -> str:
        return self.display or self.key


class GraphExtraction(models.Model):
    """What an extractor found in one chunk text, keyed by the text's SHA-256.

    Reindexing moves the triples of a replaced chunk to the new chunk of the same
    text; any other new chunk whose text was extracted before gets its triples back
    from here without calling the extractor again.
    """

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="graph_extractions"
    )
    extractor = models.CharField(max_length=100)
    content_hash = models.CharField(max_length=64)
    triples = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "extractor", "content_hash"],
                name="retrieval_graph_extraction_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.extractor} {self.content_hash[:12]}"


class IndexRun(models.Model):
    """One indexing job: what was asked, its progress, and what failed and why."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="index_runs", null=True, blank=True
    )
    task = models.CharField(
        max_length=50, help_text="The work the run records: ingest, index_documents, graph ..."
    )
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    documents_total = models.PositiveIntegerField(default=0)
    documents_done = models.PositiveIntegerField(default=0)
    documents_indexed = models.PositiveIntegerField(default=0)
    documents_skipped = models.PositiveIntegerField(default=0)
    documents_failed = models.PositiveIntegerField(default=0)
    chunks_written = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life of the process running the job."
    )
    task_id = models.CharField(max_length=64, blank=True, help_text="django-q2 task id.")
    resumed_from = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="resumes",
        help_text="The run this one resumes: its worker stopped before it ended.",
    )

    class Meta:
        ordering = ["-created_at"]
        get_latest_by = "created_at"
        indexes = [models.Index(fields=["status"], name="retrieval_indexrun_status_idx")]

    def __str__(self) -> str:
        return f"{self.task} run #{self.pk} ({self.status})"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class IndexOperation(models.Model):
    """One pending change to an external (non-transactional) index: the outbox.

    Written in the same transaction as the chunk writes or deletes it mirrors, and
    removed by the drain once the engine has applied it, so an engine that is down
    loses nothing. ``collection_id`` is no foreign key: dropping a deleted
    collection's space must outlive the collection.
    """

    class Kind(models.TextChoices):
        WRITE = "write", "Write vectors"
        DELETE = "delete", "Delete vectors"
        DROP = "drop", "Drop the space"
        REBUILD = "rebuild", "Rebuild the space"

    collection_id = models.BigIntegerField(db_index=True)
    index = models.CharField(max_length=100, help_text="Alias in RETRIEVAL['INDEXES'].")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    chunk_ids = models.JSONField(default=list, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(auto_now_add=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        indexes = [models.Index(fields=["next_attempt_at"], name="retrieval_indexop_due_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {len(self.chunk_ids)} ids of collection {self.collection_id}"


class Promotion(QueryRule):
    """An editor's pick: a document shown first for the queries ``query`` matches (see
    :class:`QueryRule`)."""

    collection = models.ForeignKey(
        Collection,
        on_delete=models.CASCADE,
        related_name="promotions",
        db_index=False,  # led by the (collection, active) index
    )
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="promotions")
    position = models.PositiveSmallIntegerField(
        default=1, help_text="Order among the documents promoted for a query (1 comes first)."
    )
    active = models.BooleanField(default=True)
    note = models.CharField(max_length=500, blank=True, help_text="Why it is promoted.")

    class Meta:
        ordering = ["collection", "query", "position", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "pattern", "document"],
                name="retrieval_promotion_unique_document",
            )
        ]
        indexes = [
            models.Index(fields=["collection", "active"], name="retrieval_promotion_coll_idx")
        ]

    def __str__(self) -> str:
        return f"{self.query} → {self.document}"


from .models_quality import (  # noqa: E402
    AnswerVote,
    EvalQuery,
    EvalRun,
    EvalSet,
    Judgment,
    QueryTrace,
    SearchClick,
)
from .models_relevance import BlockedSuggestion, HiddenResult, Synonym  # noqa: E402

__all__ = [
    "AnswerVote",
    "BlockedSuggestion",
    "Chunk",
    "Collection",
    "Document",
    "Entity",
    "EvalQuery",
    "EvalRun",
    "EvalSet",
    "GraphExtraction",
    "HiddenResult",
    "IndexOperation",
    "IndexRun",
    "Judgment",
    "Promotion",
    "QueryTrace",
    "SearchClick",
    "Synonym",
    "Triple",
]
