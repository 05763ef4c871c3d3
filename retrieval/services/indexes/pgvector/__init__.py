"""The default index: vectors ranked inside PostgreSQL by pgvector (``index.py``), in the
indexes ``ddl.py`` defines, by the queries ``planner.py`` plans."""

from retrieval.services.indexes.pgvector.ddl import (
    lexeme_index_name,
    scope_index_name,
    vector_index_name,
)
from retrieval.services.indexes.pgvector.index import PgvectorIndex

__all__ = ["PgvectorIndex", "lexeme_index_name", "scope_index_name", "vector_index_name"]
