"""The triple extractor interface: chunk texts -> (subject, predicate, object) facts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ExtractedTriple:
    """One fact found in a text, with the extractor's confidence in [0, 1]."""

    subject: str
    predicate: str
    object: str
    confidence: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence must be in [0, 1], not {self.confidence!r}.")

    def to_dict(self) -> dict[str, object]:
        return {
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "confidence": self.confidence,
        }


class BaseTripleExtractor(ABC):
    """Find knowledge-graph triples in texts.

    :meth:`extract` takes a batch of texts (chunk contents) and returns one list of
    triples per text, in order; the caller links each list to its chunk. It is
    called with at most :attr:`batch_size` texts at a time, so an LLM extractor can
    send one request per batch (or per text) as its model allows. :attr:`version`
    is part of the extraction cache key: change it when the same text would now
    give different triples, so ``--changed-only`` runs re-extract.
    """

    alias: str = ""
    batch_size: int = 16
    version: str = "1"

    @abstractmethod
    def extract(self, texts: Sequence[str]) -> list[list[ExtractedTriple]]:
        """Return the triples of each text, one list per text."""

    @property
    def cache_key(self) -> str:
        """Identify this extractor's output in the extraction cache."""
        return f"{self.alias or type(self).__name__}:{self.version}"[:100]

    def check(self) -> list:
        """Return Django check messages about this extractor's configuration."""
        return []
