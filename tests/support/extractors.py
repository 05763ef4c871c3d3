"""Triple extractors for tests whose triples can be read off the text.

They implement the real :class:`BaseTripleExtractor` contract; the storage,
traversal and retrieval they feed are the real ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from retrieval.services.extractors.base import BaseTripleExtractor, ExtractedTriple


class SentenceExtractor(BaseTripleExtractor):
    """Read ``"Subject predicate Object (0.7)."`` sentences: the verb is the second word.

    A sentence of exactly three words is a triple; underscores join the words of a
    name: ``"Ada_Lovelace wrote Notes."`` -> (Ada Lovelace, wrote, Notes).
    Records every text it is asked about in ``seen``.
    """

    batch_size = 2

    def __init__(self, fail_on: str | None = None) -> None:
        self.seen: list[str] = []
        self.fail_on = fail_on

    def extract(self, texts: Sequence[str]) -> list[list[ExtractedTriple]]:
        self.seen.extend(texts)
        if self.fail_on and any(self.fail_on in text for text in texts):
            raise RuntimeError(f"model refused a text containing {self.fail_on!r}")
        results = []
        for text in texts:
            triples = []
            for sentence in re.findall(r"(?:[^.]|\.\d)+\.", text):
                words = sentence.strip().rstrip(".").split()
                confidence = 1.0
                if words and re.fullmatch(r"\(0?\.\d+\)", words[-1]):
                    confidence = float(words.pop()[1:-1])
                if len(words) == 3:
                    subject, predicate, obj = (w.replace("_", " ") for w in words)
                    triples.append(ExtractedTriple(subject, predicate, obj, confidence))
            results.append(triples)
        return results
