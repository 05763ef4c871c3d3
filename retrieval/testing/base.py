"""What every conformance suite shares: declared gaps, and configuring the app for a test."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

#: The hand-checkable embedder the database suites index with (see ``embedders``).
KEYWORD_EMBEDDER = {"BACKEND": "retrieval.testing.KeywordEmbedder"}


class Suite:
    """A conformance suite: inherit it in a ``Test...`` class and name what is tested."""

    #: Test name -> why the implementation under test does not pass it (skipped).
    gaps: ClassVar[dict[str, str]] = {}

    @pytest.fixture(autouse=True)
    def _declared_gap(self, request: pytest.FixtureRequest) -> None:
        name = request.node.originalname or request.node.name
        if name in self.gaps:
            pytest.skip(f"declared gap: {self.gaps[name]}")


def configure(settings: Any, **overrides: Any) -> None:
    """Set ``RETRIEVAL`` keys for one test on pytest-django's ``settings`` fixture, merging
    component dicts into what the site configured."""
    current = dict(getattr(settings, "RETRIEVAL", {}) or {})
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(current.get(key), dict):
            current[key] = {**current[key], **value}
        else:
            current[key] = value
    settings.RETRIEVAL = current


def for_each_configured(suite: type[Suite], kind: str, **attributes: Any) -> dict[str, type]:
    """Return a test class of ``suite`` per alias of ``RETRIEVAL[kind]``, each setting
    ``alias``: ``globals().update(for_each_configured(RetrieverSuite, "RETRIEVERS"))``
    runs the suite on every configured retriever (a new alias joins by being configured)."""
    from retrieval.conf import retrieval_settings

    return {
        f"Test{suite.__name__.removesuffix('Suite')}_{alias}": type(
            f"Test{suite.__name__.removesuffix('Suite')}_{alias}",
            (suite,),
            {"alias": alias, "__module__": suite.__module__, **attributes},
        )
        for alias in sorted(getattr(retrieval_settings, kind))
    }
