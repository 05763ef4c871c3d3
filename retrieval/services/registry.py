"""Named components: alias -> ``BACKEND(**OPTIONS)``, built lazily and cached per thread.

Code says ``embedders["default"]`` or ``retrievers["dense"]``; a site swaps any
component through ``RETRIEVAL`` settings without code changes.

As Django keeps its database connections and caches (``BaseConnectionHandler``), each
thread (each async context, under ASGI) has its own instance of an alias, so a component
may keep per-call state on ``self``: concurrent requests of a threaded server never share
one. What is costly and safe to share (a local model's ONNX session) is shared by the
component's own means (``clients.onnx.shared``). A change of ``RETRIEVAL`` drops every
thread's instances.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from asgiref.local import Local
from django.utils.module_loading import import_string

from retrieval.conf import retrieval_settings
from retrieval.exceptions import InvalidComponentError

T = TypeVar("T")
#: Kinds whose singular is not the plural less its "s".
SINGULAR = {"INDEXES": "index"}


#: BACKEND paths of built-in components that moved, and where they are now (settings that
#: name the old path keep working; docs/changelog.md lists the moves).
MOVED = {
    "retrieval.services.retrievers.agentic.AgenticRetriever": (
        "retrieval.services.agentic.retriever.AgenticRetriever"
    ),
}


class ComponentHandler(Generic[T]):
    """Build and cache, per thread, the components of one kind (``"EMBEDDERS"``, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._instances = Local()

    def configs(self) -> dict[str, Any]:
        return getattr(retrieval_settings, self.kind)

    def expand(self, config: dict[str, Any] | str) -> dict[str, Any]:
        """Return the ``{"BACKEND", "OPTIONS"}`` form of one alias's configuration."""
        if isinstance(config, dict):
            return config
        raise InvalidComponentError(
            f"RETRIEVAL[{self.kind!r}] entries must be dicts with BACKEND, not {config!r}."
        )

    def aliases(self) -> list[str]:
        return sorted(self.configs())

    def __iter__(self) -> Iterator[str]:
        return iter(self.aliases())

    def __contains__(self, alias: object) -> bool:
        return alias in self.configs()

    def __getitem__(self, alias: str) -> T:
        try:
            return getattr(self._instances, alias)
        except AttributeError:
            instance = self.create(alias)
            setattr(self._instances, alias, instance)
            return instance

    def create(self, alias: str) -> T:
        """Build a fresh instance of ``alias`` from settings."""
        configs = self.configs()
        if alias not in configs:
            raise InvalidComponentError(
                f"Unknown {SINGULAR.get(self.kind, self.kind.lower()[:-1])} {alias!r}; "
                f"configured: {', '.join(self.aliases()) or '(none)'}."
            )
        config = self.expand(configs[alias])
        backend = MOVED.get(config.get("BACKEND"), config.get("BACKEND"))
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
        """Drop every thread's instances (as Django does for ``CACHES``: a new ``Local``)."""
        self._instances = Local()


class LLMHandler(ComponentHandler[Any]):
    """LLMs also accept the short form ``"openai:MODEL"``."""

    PROVIDERS = {"openai": "retrieval.services.llms.openai.OpenAIChatLLM"}

    def expand(self, config: dict[str, Any] | str) -> dict[str, Any]:
        if isinstance(config, str):
            provider, _, model = config.partition(":")
            if provider not in self.PROVIDERS or not model:
                raise InvalidComponentError(
                    f"RETRIEVAL['LLMS'] short form {config!r} must be 'PROVIDER:MODEL' with "
                    f"PROVIDER one of {', '.join(self.PROVIDERS)}, e.g. 'openai:gpt-4o-mini'."
                )
            return {"BACKEND": self.PROVIDERS[provider], "OPTIONS": {"model": model}}
        return super().expand(config)


parsers: ComponentHandler[Any] = ComponentHandler("PARSERS")
chunkers: ComponentHandler[Any] = ComponentHandler("CHUNKERS")
embedders: ComponentHandler[Any] = ComponentHandler("EMBEDDERS")
analyzers: ComponentHandler[Any] = ComponentHandler("ANALYZERS")
retrievers: ComponentHandler[Any] = ComponentHandler("RETRIEVERS")
llms: ComponentHandler[Any] = LLMHandler("LLMS")
rewriters: ComponentHandler[Any] = ComponentHandler("REWRITERS")
rerankers: ComponentHandler[Any] = ComponentHandler("RERANKERS")
extractors: ComponentHandler[Any] = ComponentHandler("EXTRACTORS")
indexes: ComponentHandler[Any] = ComponentHandler("INDEXES")
queues: ComponentHandler[Any] = ComponentHandler("QUEUES")

HANDLERS = (
    parsers,
    chunkers,
    embedders,
    analyzers,
    retrievers,
    llms,
    rewriters,
    rerankers,
    extractors,
    indexes,
    queues,
)


def reset_components() -> None:
    """Drop every cached component (called when ``RETRIEVAL`` changes)."""
    for handler in HANDLERS:
        handler.reset()
