"""Chunk queries shared by the retrievers and the API."""

from __future__ import annotations

from django.db import models


class ChunkQuerySet(models.QuerySet):
    def for_results(self) -> ChunkQuerySet:
        """Load what a search result shows: the chunk and its document, not the vectors.

        Parsing 384 floats per row and the documents' full text would cost more
        than the ranking itself. Unordered: results take the ranking's order, and
        the model's ordering would join the collection table to sort by its name.
        """
        return (
            self.select_related("document")
            .defer("embedding", "embedding_next", "document__content")
            .order_by()
        )
