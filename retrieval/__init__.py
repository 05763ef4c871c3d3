"""django-retrieval: a drop-in Django app for retrieval on PostgreSQL + pgvector.

Importing this package has no side effects; the public service API lives in
:mod:`retrieval.services`.
"""

__version__ = "0.1.0"
