"""Text analysis for BM25: lower-case word tokens, stop words removed, then stemmed."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable

from retrieval.exceptions import MissingDependencyError
from retrieval.services.sparse.stopwords import BY_LANGUAGE

#: Words of two or more word characters: the same pattern as bm25s and scikit-learn.
TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
#: Longer "words" (hashes, base64 blobs) are not indexed: a B-tree key has a size limit.
MAX_TERM_LENGTH = 100
#: The words of an identifier: ``select_related`` -> select, related; ``HTTPEndpoint`` ->
#: HTTP, Endpoint; ``getElementById`` -> get, Element, By, Id.
IDENTIFIER_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


class Analyzer:
    """Turn text into index terms: tokenize, lower-case, drop stop words, stem (Snowball).

    ``language`` names a Snowball stemmer (``"english"``, ``"french"`` ...) or ``None``
    for no stemming; ``stopwords`` is a language name with a built-in list, an
    iterable of words, or ``None``. With ``split_identifiers``, an identifier
    (``select_related``, ``HTTPEndpoint``) also gives the words it is made of, so a
    question that says "select related" finds it, and it finds text about its words.
    """

    def __init__(
        self,
        language: str | None = "english",
        stopwords: str | Iterable[str] | None = "english",
        *,
        split_identifiers: bool = False,
    ) -> None:
        if isinstance(stopwords, str):
            if stopwords not in BY_LANGUAGE:
                raise ValueError(
                    f"No built-in stop words for {stopwords!r} (have: {', '.join(BY_LANGUAGE)}); "
                    "pass a list of words instead."
                )
            stopwords = BY_LANGUAGE[stopwords]
        self.language = language
        self.split_identifiers = split_identifiers
        self.stopwords = frozenset(w.lower() for w in stopwords or ())
        self._local = threading.local()  # Snowball stemmers are not thread-safe
        if language is not None:
            self._stemmer()  # fail now, naming the language, not at the first document

    def _stemmer(self):
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            try:
                import Stemmer
            except ImportError as e:
                raise MissingDependencyError(
                    "BM25 stemming needs PyStemmer: pip install PyStemmer"
                ) from e
            try:
                stemmer = Stemmer.Stemmer(self.language)
            except KeyError as e:
                raise ValueError(
                    f"Unknown stemmer language {self.language!r}; "
                    f"available: {', '.join(sorted(Stemmer.algorithms()))}."
                ) from e
            self._local.stemmer = stemmer
        return stemmer

    def terms(self, text: str) -> list[str]:
        """Return the index terms of ``text`` in order, with repeats."""
        if self.split_identifiers:
            words = self._words_and_parts(text)
        else:
            words = [
                w
                for w in TOKEN_PATTERN.findall(text.lower())
                if w not in self.stopwords and len(w) <= MAX_TERM_LENGTH
            ]
        if self.language is None:
            return words
        return self._stemmer().stemWords(words)

    def _words_and_parts(self, text: str) -> list[str]:
        """Return the words of ``text``, each identifier followed by its parts."""
        words = []
        for word in TOKEN_PATTERN.findall(text):
            lower = word.lower()
            if lower not in self.stopwords and len(word) <= MAX_TERM_LENGTH:
                words.append(lower)
            parts = IDENTIFIER_PARTS.findall(word)
            if len(parts) > 1:
                words.extend(
                    p
                    for p in map(str.lower, parts)
                    if len(p) >= 2 and p not in self.stopwords and len(p) <= MAX_TERM_LENGTH
                )
        return words

    def term_counts(self, text: str) -> tuple[Counter[str], int]:
        """Return each term's frequency in ``text`` and the number of terms (the length)."""
        terms = self.terms(text)
        return Counter(terms), len(terms)
