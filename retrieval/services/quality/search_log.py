"""The import path the docs named before :mod:`retrieval.services.query.search_log` moved;
kept for code that names its own face with ``traced_as``."""

from retrieval.services.query.search_log import traced_as, untraced

__all__ = ["traced_as", "untraced"]
