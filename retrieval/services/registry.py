"""Named components: alias -> ``BACKEND(**OPTIONS)``, built lazily and cached.

Code says ``embedders["default"]`` or ``retrievers["dense"]``; a site swaps any
component through ``RETRIEVAL`` settings without code changes.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from django.utils.module_loading import import_string

from retrieval.conf import retrieval_settings
from retrieval.exceptions import InvalidComponentError

T = TypeVar("T")


class ComponentHandler(Generic[T]):
    """Build and cache the components of one kind (``"EMBEDDERS"``, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._instances: dict[str, T] = {}

    def configs(self) -> dict[str, dict[str, Any]]:
        return getattr(retrieval_settings, self.kind)

    def aliases(self) -> list[str]:
        return sorted(self.configs())

    def __contains__(self, alias: object) -> bool:
        return alias in self.configs()

    def __getitem__(self, alias: str) -> T:
        if alias not in self._instances:
            self._instances[alias] = self.create(alias)
        return self._instances[alias]

    def create(self, alias: str) -> T:
        """Build a fresh instance of ``alias`` from settings."""
        configs = self.configs()
        if alias not in configs:
            raise InvalidComponentError(
                f"Unknown {self.kind.lower()[:-1]} {alias!r}; "
                f"configured: {', '.join(self.aliases()) or '(none)'}."
            )
        config = configs[alias]
        backend = config.get("BACKEND")
        try:
            cls = import_string(backend)
        except ImportError as e:
            raise InvalidComponentError(
                f"RETRIEVAL[{self.kind!r}][{alias!r}]: cannot import BACKEND {backend!r}: {e}"
            ) from e
        try:
            instance = cls(**config.get("OPTIONS", {}))
        except (TypeError, ValueError) as e:
            raise InvalidComponentError(
                f"RETRIEVAL[{self.kind!r}][{alias!r}]: bad OPTIONS for {backend}: {e}"
            ) from e
        instance.alias = alias
        return instance

    def all(self) -> list[T]:
        return [self[alias] for alias in self.aliases()]

    def reset(self) -> None:
        self._instances.clear()


parsers: ComponentHandler[Any] = ComponentHandler("PARSERS")
chunkers: ComponentHandler[Any] = ComponentHandler("CHUNKERS")
embedders: ComponentHandler[Any] = ComponentHandler("EMBEDDERS")
analyzers: ComponentHandler[Any] = ComponentHandler("ANALYZERS")
retrievers: ComponentHandler[Any] = ComponentHandler("RETRIEVERS")
extractors: ComponentHandler[Any] = ComponentHandler("EXTRACTORS")

HANDLERS = (parsers, chunkers, embedders, analyzers, retrievers, extractors)


def reset_components() -> None:
    """Drop every cached component (called when ``RETRIEVAL`` changes)."""
    for handler in HANDLERS:
        handler.reset()
