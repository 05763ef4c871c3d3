"""Bounded agentic retrieval: retrieve, select, judge, retry — with LLM or offline stages."""
