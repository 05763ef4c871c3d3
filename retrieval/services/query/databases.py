"""The import path the docs named before :mod:`retrieval.services.core.databases` (read
replicas) moved; kept for code that uses its helpers."""

from retrieval.services.core.databases import primary_database, read_primary, search_database

__all__ = ["primary_database", "read_primary", "search_database"]
