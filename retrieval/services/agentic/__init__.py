"""Bounded agentic retrieval: retrieve, select, judge, retry — with LLM or offline stages.

``build()`` (in :mod:`.pipeline`) returns a configured :class:`AgenticRetrievalPipeline`.
"""
