"""Query methods that keep ranking in the database."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import models
from django.db.models.functions import Cast
from pgvector.django import CosineDistance, VectorField


class ChunkQuerySet(models.QuerySet):
    def for_results(self) -> ChunkQuerySet:
        """Load what a search result shows: the chunk and its document, not the vectors.

        Parsing 384 floats per row and the documents' full text would cost more
        than the ranking itself.
        """
        return self.select_related("document").defer("embedding", "document__content")

    def nearest(self, vector: Sequence[float], *, dimensions: int) -> ChunkQuerySet:
        """Order by cosine distance to ``vector``, annotating ``distance``.

        The cast to ``vector(dimensions)`` matches the expression of the
        collection's partial HNSW index, so the planner can use it.
        """
        typed = Cast("embedding", VectorField(dimensions=dimensions))
        return self.annotate(distance=CosineDistance(typed, list(vector))).order_by("distance")
