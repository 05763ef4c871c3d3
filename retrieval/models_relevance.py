"""Editors' relevance rules beside promotions: synonyms, hidden results, blocked suggestions.

Imported by :mod:`retrieval.models`; searches apply them in
:mod:`retrieval.services.query.synonyms`, :mod:`retrieval.services.query.hiding` and
:mod:`retrieval.services.query.suggestions`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .services.query.normalizing import like_pattern


class Synonym(models.Model):
    """Words a BM25 query also looks for: ``couch, sofa`` (two-way: each stands for the
    others) or ``tv -> television`` (one-way: a query saying tv also finds television).

    A rule of no collection applies to every collection.
    """

    collection = models.ForeignKey(
        "retrieval.Collection",
        on_delete=models.CASCADE,
        related_name="synonyms",
        null=True,
        blank=True,
        help_text="Blank: every collection.",
    )
    rule = models.CharField(
        max_length=500,
        help_text="Words that mean the same, “couch, sofa”, or a one-way rule, "
        "“tv -> television”. Each is one word after analysis (case and endings are ignored).",
    )
    active = models.BooleanField(default=True)
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["collection", "rule", "pk"]
        indexes = [models.Index(fields=["collection", "active"], name="retrieval_synonym_coll_idx")]

    def __str__(self) -> str:
        return self.rule


class HiddenResult(models.Model):
    """An editor's removal: a document left out of the results of the queries ``query``
    matches (a query or a ``*`` pattern, matched as promotions match)."""

    collection = models.ForeignKey(
        "retrieval.Collection",
        on_delete=models.CASCADE,
        related_name="hidden_results",
        db_index=False,  # led by the (collection, active) index
    )
    query = models.CharField(
        max_length=500,
        help_text="The query, or a pattern where * stands for any text: “vpn*”, “reset * "
        "password”. Case and spacing are ignored.",
    )
    document = models.ForeignKey(
        "retrieval.Document", on_delete=models.CASCADE, related_name="hidden_results"
    )
    active = models.BooleanField(default=True)
    note = models.CharField(max_length=500, blank=True, help_text="Why it is hidden.")
    pattern = models.GeneratedField(
        expression=like_pattern("query"),
        output_field=models.CharField(max_length=2000),
        db_persist=True,
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

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


class BlockedSuggestion(models.Model):
    """Queries never offered as suggestions: a query or a ``*`` pattern (``*casino*``).

    A rule of no collection applies to every collection.
    """

    collection = models.ForeignKey(
        "retrieval.Collection",
        on_delete=models.CASCADE,
        related_name="blocked_suggestions",
        null=True,
        blank=True,
        help_text="Blank: every collection.",
    )
    query = models.CharField(
        max_length=500,
        help_text="A query, or a pattern where * stands for any text: “*casino*”. "
        "Case and spacing are ignored.",
    )
    pattern = models.GeneratedField(
        expression=like_pattern("query"),
        output_field=models.CharField(max_length=2000),
        db_persist=True,
    )
    note = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["collection", "query", "pk"]

    def __str__(self) -> str:
        return self.query
