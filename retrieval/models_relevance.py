"""Editors' relevance rules: the bases promotions share, synonyms, hidden results, blocked
suggestions.

Imported by :mod:`retrieval.models`; searches apply them in
:mod:`retrieval.services.sparse.synonyms`, :mod:`retrieval.services.query.hiding` and
:mod:`retrieval.services.query.suggestions`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .normalizing import like_pattern


class EditorsRule(models.Model):
    """Who wrote a rule, and when."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class QueryRule(EditorsRule):
    """A rule for the queries ``query`` matches: a query or a pattern where ``*`` stands for
    any text (``vpn*``, ``reset * password``), matched ignoring case and runs of
    whitespace; ``pattern`` is its SQL ``LIKE`` form, computed by PostgreSQL."""

    query = models.CharField(
        max_length=500,
        help_text="The query, or a pattern where * stands for any text: “vpn*”, “reset * "
        "password”. Case and spacing are ignored.",
    )
    pattern = models.GeneratedField(
        expression=like_pattern("query"),
        output_field=models.CharField(max_length=2000),
        db_persist=True,
    )

    class Meta:
        abstract = True


def optional_collection(related_name: str) -> models.ForeignKey:
    """A rule's collection, blank for a rule of every collection."""
    return models.ForeignKey(
        "retrieval.Collection",
        on_delete=models.CASCADE,
        related_name=related_name,
        null=True,
        blank=True,
        help_text="Blank: every collection.",
    )


class Synonym(EditorsRule):
    """Words a BM25 query also looks for: ``couch, sofa`` (two-way: each stands for the
    others) or ``tv -> television`` (one-way: a query saying tv also finds television).

    A rule of no collection applies to every collection.
    """

    collection = optional_collection("synonyms")
    rule = models.CharField(
        max_length=500,
        help_text="Words that mean the same, “couch, sofa”, or a one-way rule, "
        "“tv -> television”. Each is one word after analysis (case and endings are ignored).",
    )
    active = models.BooleanField(default=True)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["collection", "rule", "pk"]
        indexes = [models.Index(fields=["collection", "active"], name="retrieval_synonym_coll_idx")]

    def __str__(self) -> str:
        return self.rule


class HiddenResult(QueryRule):
    """An editor's removal: a document left out of the results of the queries ``query``
    matches (as promotions match)."""

    collection = models.ForeignKey(
        "retrieval.Collection",
        on_delete=models.CASCADE,
        related_name="hidden_results",
        db_index=False,  # led by the (collection, active) index
    )
    document = models.ForeignKey(
        "retrieval.Document", on_delete=models.CASCADE, related_name="hidden_results"
    )
    active = models.BooleanField(default=True)
    note = models.CharField(max_length=500, blank=True, help_text="Why it is hidden.")

    class Meta:
        ordering = ["collection", "query", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "pattern", "document"],
                name="retrieval_hidden_unique_document",
            )
        ]
        indexes = [models.Index(fields=["collection", "active"], name="retrieval_hidden_coll_idx")]

    def __str__(self) -> str:
        return f"{self.query} ↛ {self.document}"


class BlockedSuggestion(QueryRule):
    """Queries never offered as suggestions (``*casino*``); a rule of no collection
    applies to every collection."""

    collection = optional_collection("blocked_suggestions")
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["collection", "query", "pk"]

    def __str__(self) -> str:
        return self.query
