"""Rerankers (``RETRIEVAL["RERANKERS"]``): reorder a retriever's results for a query."""
