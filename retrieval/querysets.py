"""Chunk queries shared by the retrievers and the API."""

from __future__ import annotations

from django.db import models


class ChunkQuerySet(models.QuerySet):
    def for_results(self) -> ChunkQuerySet:
        """Load what a search result shows: the chunk and its document, not the vectors.

        Parsing 384 floats per row and the documents' full text would cost more
        than the ranking itself.
        """
        return self.select_related("document").defer("embedding", "document__content")
