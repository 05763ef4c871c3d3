"""Every configured retriever through the public suite (retrieval.testing.retrievers): a
retriever joins by being configured in RETRIEVAL["RETRIEVERS"]."""

from __future__ import annotations

from retrieval.testing.base import for_each_configured
from retrieval.testing.retrievers import RetrieverSuite

globals().update(for_each_configured(RetrieverSuite, "RETRIEVERS"))


def test_every_built_in_retriever_is_run():
    assert {"TestRetriever_bm25", "TestRetriever_dense", "TestRetriever_hybrid"} <= set(globals())
    assert {"TestRetriever_graph", "TestRetriever_agentic"} <= set(globals())
