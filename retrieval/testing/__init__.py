"""Conformance suites for the app's components, for this project and for third parties.

Each kind of component has a suite a test class inherits, naming the implementation
under test; pytest (with pytest-django, for suites that touch the database) collects
its tests, exactly as the app's own tests run them on every built-in implementation::

    # tests/test_my_index.py of a package providing an index backend
    from retrieval.testing.indexes import IndexSuite

    class TestMyIndex(IndexSuite):
        backend = "my_package.MyIndex"
        options = {"url": "http://127.0.0.1:9000"}
        gaps = {"test_re_embedding_moves_the_index_to_the_new_space": "no re-embedding yet"}

``gaps`` declares, with a reason, the tests an implementation knows it does not pass
(like Wagtail's search backend tests): they are skipped and say why. What an
implementation cannot do by design is data it declares itself (an index's
``features``), which the suites read.

Suites: :mod:`~retrieval.testing.parsers`, :mod:`~retrieval.testing.chunkers`,
:mod:`~retrieval.testing.embedders` (with :class:`KeywordEmbedder`, whose vectors are
worked out by hand), :mod:`~retrieval.testing.indexes`,
:mod:`~retrieval.testing.retrievers`, :mod:`~retrieval.testing.rerankers`,
:mod:`~retrieval.testing.rewriters`, :mod:`~retrieval.testing.llms`,
:mod:`~retrieval.testing.extractors`, :mod:`~retrieval.testing.queues`.
"""

from retrieval.testing.embedders import KeywordEmbedder

__all__ = ["KeywordEmbedder"]
