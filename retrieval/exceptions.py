"""Errors raised by the retrieval app; each names what to fix."""

from django.core.exceptions import ImproperlyConfigured


class RetrievalError(Exception):
    """Base class of every error the app raises on purpose."""


class CollectionNotFound(RetrievalError, LookupError):
    """No collection has that slug or name, or the requesting user may not see it."""


class AccessDenied(RetrievalError, PermissionError):
    """The requesting user may see this but not change it (the API answers 403)."""


class InvalidComponentError(RetrievalError, ImproperlyConfigured):
    """A named component (parser, chunker, embedder, retriever) is unknown or cannot load."""


class MissingDependencyError(RetrievalError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class ParseError(RetrievalError):
    """A file cannot be parsed: corrupt, empty or of an unsupported type."""


class UnsupportedFileType(ParseError):
    """No configured parser accepts this MIME type or file extension."""


class ParserUnavailable(UnsupportedFileType):
    """A parser reads this type of file, but its optional dependency is not installed; the
    message names the extra to install."""


class ServiceUnavailableError(RetrievalError):
    """A service the app calls did not answer (down, unreachable, timed out, overloaded).

    The request itself was fine: the same call may succeed later (the API answers 503).
    """


class DeadlineExceeded(ServiceUnavailableError):
    """A search's deadline (``SEARCH_DEADLINE``, or a service's share of it) passed before a
    remote call could be made or answered."""


class IndexUnavailableError(ServiceUnavailableError):
    """An external index engine did not answer a search (down, unreachable, or it failed).

    PostgreSQL still holds every vector; writes wait in the outbox until the engine is back.
    """


class EmbeddingError(RetrievalError):
    """The embedder failed or returned vectors of the wrong shape."""


class EmbeddingUnavailableError(EmbeddingError, ServiceUnavailableError):
    """The embedding service did not answer: refused, timed out, or 429/5xx after retries."""


class DimensionMismatchError(EmbeddingError):
    """An embedder's dimension differs from its collection's."""


class InvalidFilterError(RetrievalError, ValueError):
    """A retrieval filter is malformed (unknown key, wrong type)."""


class LLMError(RetrievalError):
    """A language model call failed, timed out, or answered something unusable."""


class BudgetExceeded(LLMError):
    """A query's LLM budget (calls, tokens or seconds) would be exceeded."""
