"""Tables that measure search: golden sets, their judgments, evaluation runs and traces.

Imported by :mod:`retrieval.models`; services live in :mod:`retrieval.services.quality.goldens`,
:mod:`retrieval.services.quality.eval_runs` and :mod:`retrieval.services.query.search_log`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .normalizing import QUERY_KEY_LENGTH, query_key


class EvalSet(models.Model):
    """A golden set: queries of one collection with graded judgments of what answers them."""

    class Level(models.TextChoices):
        DOCUMENTS = "documents", "Documents"
        CHUNKS = "chunks", "Chunks"

    # Unique within its collection, so a set of a collection someone may not see can
    # never clash with (and reveal itself to) theirs.
    name = models.CharField(max_length=200)
    collection = models.ForeignKey(
        "retrieval.Collection", on_delete=models.CASCADE, related_name="eval_sets"
    )
    level = models.CharField(
        max_length=20,
        choices=Level.choices,
        default=Level.DOCUMENTS,
        help_text="Judge documents (external ids) or chunks (external id#chunk index).",
    )
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "name"], name="retrieval_evalset_unique_name"
            )
        ]

    def __str__(self) -> str:
        return self.name


class EvalQuery(models.Model):
    """One query of a golden set; ``query_id`` is its id in the BEIR export."""

    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="queries")
    query_id = models.CharField(max_length=200)
    text = models.TextField()
    reference_answer = models.TextField(
        blank=True,
        help_text="A short answer written from the documents; grounded answers are scored "
        "against it (token F1). Blank: not scored.",
    )
    answerable = models.BooleanField(
        default=True,
        help_text="Whether the documents answer the query; an answer service should abstain "
        "on those that are not.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["eval_set", "pk"]
        verbose_name_plural = "eval queries"
        constraints = [
            models.UniqueConstraint(
                fields=["eval_set", "query_id"], name="retrieval_evalquery_unique_id"
            )
        ]

    def __str__(self) -> str:
        return self.text[:80]


class Judgment(models.Model):
    """How well a document (or chunk) answers a query: 0 not relevant, 1+ relevant.

    ``target`` is a document's external id, or ``external_id#chunk_index`` in a set
    judging chunks. Only accepted judgments count; votes arrive as candidates.
    """

    class Status(models.TextChoices):
        ACCEPTED = "accepted", "Accepted"
        CANDIDATE = "candidate", "Candidate"
        REJECTED = "rejected", "Rejected"

    query = models.ForeignKey(EvalQuery, on_delete=models.CASCADE, related_name="judgments")
    target = models.CharField(max_length=1100)
    grade = models.SmallIntegerField(default=1)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACCEPTED)
    source = models.CharField(
        max_length=50, blank=True, help_text="Where it came from: import, playground, feedback."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["query", "-grade", "target"]
        constraints = [
            models.UniqueConstraint(
                fields=["query", "target"], name="retrieval_judgment_unique_target"
            )
        ]
        indexes = [models.Index(fields=["status"], name="retrieval_judgment_status_idx")]

    def __str__(self) -> str:
        return f"{self.target} = {self.grade}"


class EvalRun(models.Model):
    """One pipeline evaluated over a golden set: progress, metrics and per-query results."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    eval_set = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="runs")
    pipeline = models.CharField(max_length=100)
    top_k = models.PositiveIntegerField(default=100)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    queries_total = models.PositiveIntegerField(default=0)
    queries_done = models.PositiveIntegerField(default=0)
    metrics = models.JSONField(default=dict, blank=True)
    per_query = models.JSONField(default=dict, blank=True)
    message = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    task_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-created_at"]
        get_latest_by = "created_at"

    def __str__(self) -> str:
        return f"{self.eval_set} · {self.pipeline} #{self.pk}"


class QueryTrace(models.Model):
    """One search as it happened: what ran, each stage's candidates, and what came back."""

    class Source(models.TextChoices):
        """Which face ran the search: analytics count readers' faces, not editors'."""

        PAGE = "page", "Search page"
        API = "api", "API"
        TOOL = "tool", "Tool call"
        PLAYGROUND = "playground", "Playground"
        EVALUATION = "evaluation", "Evaluation"
        COMMAND = "command", "Command"
        PYTHON = "python", "Python"
        ANSWER = "answer", "Answer"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    query = models.TextField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,  # led by retrieval_trace_user_idx
    )
    collection = models.ForeignKey(
        "retrieval.Collection",
        on_delete=models.CASCADE,
        related_name="traces",
        db_index=False,  # led by retrieval_trace_report_idx
    )
    pipeline = models.CharField(max_length=200)
    top_k = models.PositiveIntegerField(default=10)
    filters = models.JSONField(default=dict, blank=True)
    ms = models.FloatField(default=0.0)
    llm_tokens = models.PositiveIntegerField(default=0)
    result_count = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=list, blank=True)
    trace = models.JSONField(default=dict, blank=True)
    source = models.CharField(
        max_length=20, choices=Source.choices, default=Source.PYTHON, db_default=Source.PYTHON
    )
    # What search analytics group by: the query lower-cased, its spaces collapsed, cut
    # to 200 characters; computed by PostgreSQL, so raw inserts get it too.
    query_key = models.GeneratedField(
        expression=query_key("query"),
        output_field=models.CharField(max_length=QUERY_KEY_LENGTH),
        db_persist=True,
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Every figure of the dashboard and of search analytics reads a collection's
            # traces of a period from this index alone (an index-only scan); the source is
            # included so that leaving editors' searches out reads no table row, the user
            # for unique searchers, the id to join the clicks ...
            models.Index(
                fields=["collection", "created_at"],
                include=["query_key", "result_count", "ms", "source", "user", "id"],
                name="retrieval_trace_report_idx",
            ),
            # ... or, for staff who see only their own traces, from this one.
            models.Index(
                fields=["user", "collection", "created_at"],
                include=["query_key", "result_count", "ms", "source", "id"],
                name="retrieval_trace_user_idx",
            ),
            # Searches that found nothing, a small share: their queries without the rest.
            models.Index(
                fields=["collection", "created_at"],
                include=["query_key", "source"],
                condition=models.Q(result_count=0),
                name="retrieval_trace_empty_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.query[:60]} ({self.pipeline})"


class SearchClick(models.Model):
    """A reader following a result of a kept search: one row per search and document.

    ``position`` is the document's place among the search's documents (1 for the first,
    each document counted once, as the results page groups them), worked out from the
    trace's results, not taken from the client. Joined to traces through ``trace``
    (``QueryTrace.clicks``) for click-through rate and click position.
    """

    trace = models.ForeignKey(QueryTrace, on_delete=models.CASCADE, related_name="clicks")
    # Kept when the document goes: the search was still clicked.
    document = models.ForeignKey(
        "retrieval.Document", on_delete=models.SET_NULL, null=True, related_name="+"
    )
    position = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # A search's click on a document counts once however often it is followed.
            models.UniqueConstraint(fields=["trace", "document"], name="retrieval_click_once")
        ]

    def __str__(self) -> str:
        return f"{self.trace_id} → {self.document_id} (#{self.position})"


class AnswerVote(models.Model):
    """The asker's vote on an answer: helpful or not, one per user and answer.

    ``trace`` is the answer's :class:`QueryTrace` (``QueryTrace.answer_votes``); a second
    vote changes the first. Counted by answer analytics over the answers of a period.
    """

    trace = models.ForeignKey(
        QueryTrace,
        on_delete=models.CASCADE,
        related_name="answer_votes",
        db_index=False,  # led by retrieval_answer_vote_once
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    helpful = models.BooleanField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["trace", "user"], name="retrieval_answer_vote_once")
        ]

    def __str__(self) -> str:
        return f"{self.trace_id}: {'helpful' if self.helpful else 'not helpful'}"
