"""The LLM guide's settings block: as written, the checks name its three placeholders;
without them, it passes (issue 37: the standalone rewriter named the removed LLM)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core import checks

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "llm.md"
PLACEHOLDERS = {"E012", "E013", "E003"}  # the "openai" LLM, "cross", "recency"


# Django 6.1's checks ask the database (the GeneratedFields of the app's models).
pytestmark = pytest.mark.django_db


def llm_settings() -> dict:
    """Return the ``RETRIEVAL`` dict of the LLM guide, as written."""
    section = GUIDE.read_text().split("# LLM components", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(code, namespace)  # the block is a literal dict
    return namespace["RETRIEVAL"]


def retrieval_errors() -> set[str]:
    return {
        message.id.removeprefix("retrieval.")
        for message in checks.run_checks()
        if message.level >= checks.ERROR and (message.id or "").startswith("retrieval.")
    }


def test_the_block_fails_only_on_its_placeholders(settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.RETRIEVAL = llm_settings()
    assert retrieval_errors() == PLACEHOLDERS


def test_the_block_passes_the_checks_once_its_placeholders_are_removed(settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = llm_settings()
    del config["LLMS"]["openai"], config["RERANKERS"]["cross"], config["RERANKERS"]["recency"]
    settings.RETRIEVAL = config
    assert retrieval_errors() == set()
