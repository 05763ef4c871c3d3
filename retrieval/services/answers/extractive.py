"""The answer without a model: the sentences of the passages that best answer the question.

Sentences are scored against the question as BM25 scores chunks (each sentence a
document, the terms of the ``ANALYZERS["default"]`` analyzer), so the choice is
deterministic and needs no network; the best few are kept, each with its passage's
citation. The same scoring picks the sentence a model's citation quotes.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from retrieval.services.query.packing import sentence_boundaries
from retrieval.services.registry import analyzers

#: BM25's constants, as the BM25 retriever's defaults.
K1, B = 1.2, 0.75
#: A sentence scoring less than this share of the best one is not part of the answer:
#: a word it shares with the question by chance ("support tickets" for "supported").
RELATIVE_FLOOR = 0.5
#: A sentence sharing fewer of the question's terms than this (itself or the heading it
#: answers) is not part of the answer when another sentence shares this many: the word it
#: shares is not what the question is about ("support tickets" beside "databases ...
#: supported"). 1: off. Chosen by ``bench/answers.py --sweep`` over real document sets.
MIN_SHARED_TERMS = 2
#: Fewer words than this do not answer anything ("# ...", "Done.").
MIN_WORDS = 3
# A statement ends with . ! or : (perhaps closed by quotes or brackets), or 。！.
_STATEMENT_END = re.compile(r"[.!:\u3002\uff01][\"')\]]*$")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Sentence:
    """A sentence of passage ``number``, at ``position`` among its sentences; ``terms``:
    the question's terms it shares, itself or the heading or question it answers."""

    number: int
    position: int
    text: str
    terms: frozenset[str] = frozenset()


def split_sentences(text: str) -> list[str]:
    """Return the sentences of ``text`` (``packing``'s boundaries), stripped, none empty."""
    pieces, start = [], 0
    for end in [*sentence_boundaries(text), len(text)]:
        piece = " ".join(text[start:end].split())
        if piece:
            pieces.append(piece)
        start = end
    return pieces


def rank_sentences(question: str, passages: Mapping[int, str]) -> list[tuple[float, Sentence]]:
    """Return the passages' sentences that answer ``question``, best first (ties: the
    earlier passage, then the earlier sentence), with their scores.

    A question or a heading (a line that does not end a sentence) is not an answer:
    its score and terms go to the sentence after it, which answers it in an FAQ or a
    section. Headings count as answers only in passages that have nothing else.
    """
    analyzer = analyzers["default"]
    wanted = set(analyzer.terms(question))
    sentences = [
        Sentence(number, position, text)
        for number, body in sorted(passages.items())
        for position, text in enumerate(split_sentences(body))
    ]
    if not wanted or not sentences:
        return []
    counts = [Counter(analyzer.terms(sentence.text)) for sentence in sentences]
    lengths = [sum(count.values()) for count in counts]
    average = sum(lengths) / len(lengths) or 1.0
    idf = _idf(wanted, counts)
    own = [
        sum(
            idf[term] * count[term] * (K1 + 1) / (count[term] + K1 * (1 - B + B * length / average))
            for term in wanted & count.keys()
        )
        for count, length in zip(counts, lengths, strict=True)
    ]
    answers = [not _leads(sentence.text) for sentence in sentences]
    scored, carried, carried_terms = [], 0.0, frozenset()
    for index, sentence in enumerate(sentences):
        if index and sentence.number != sentences[index - 1].number:
            carried, carried_terms = 0.0, frozenset()  # a heading answers in its passage only
        terms = carried_terms | (wanted & counts[index].keys())
        if answers[index] or not any(
            answers[i] for i, other in enumerate(sentences) if other.number == sentence.number
        ):
            score, carried, carried_terms = own[index] + carried, 0.0, frozenset()
            if score > 0 and not sentence.text.endswith("?"):
                scored.append((score, replace(sentence, terms=terms)))
        else:
            carried, carried_terms = carried + own[index], terms
    scored.sort(key=lambda pair: (-pair[0], pair[1].number, pair[1].position))
    return scored


def coverage(question: str, passages: Mapping[int, str], *, sentences: int) -> float:
    """Return the share of ``question``'s terms that the ``sentences`` best sentences of
    ``passages`` (:func:`extract`'s candidates) cover, each term weighted by its IDF among
    the passages' sentences: a term no passage has weighs most, so a question about
    something the passages never name is barely covered however well its common words
    match. 0.0 when no sentence shares a term with the question."""
    analyzer = analyzers["default"]
    wanted = set(analyzer.terms(question))
    counts = [
        Counter(analyzer.terms(t)) for body in passages.values() for t in split_sentences(body)
    ]
    idf = _idf(wanted, counts)
    total = sum(idf.values())
    covered = set().union(
        *(s.terms for s in _candidates(rank_sentences(question, passages), sentences))
    )
    return sum(idf[term] for term in covered & wanted) / total if total else 0.0


def _idf(wanted: set[str], counts: Sequence[Counter]) -> dict[str, float]:
    """Return BM25's IDF of each term of ``wanted`` over the sentences' term ``counts``
    (a term no sentence has counts too: it is the rarest)."""
    frequency = Counter(term for count in counts for term in wanted & count.keys())
    return {
        term: math.log(1 + (len(counts) - frequency[term] + 0.5) / (frequency[term] + 0.5))
        for term in wanted
    }


def _leads(text: str) -> bool:
    """Whether ``text`` asks or heads rather than states: a question, a line that does
    not end as a sentence does (a heading), or a few words."""
    return (
        text.endswith("?")
        or not _STATEMENT_END.search(text)
        or len(_WORD.findall(text)) < MIN_WORDS
    )


def extract(question: str, passages: Mapping[int, str], *, sentences: int) -> list[Sentence]:
    """Return the ``sentences`` best sentences for ``question`` (those scoring at least
    :data:`RELATIVE_FLOOR` of the best and sharing :data:`MIN_SHARED_TERMS` of the
    question's terms, or as many as the sentence sharing most), in passage order; an
    empty list when no sentence shares a term with the question."""
    ranked = rank_sentences(question, passages)
    if not ranked:
        return []
    shared = min(MIN_SHARED_TERMS, max(len(s.terms) for _, s in ranked))
    best = [s for s in _candidates(ranked, sentences) if len(s.terms) >= shared]
    return sorted(best, key=lambda sentence: (sentence.number, sentence.position))


def _candidates(ranked: list[tuple[float, Sentence]], sentences: int) -> list[Sentence]:
    """The ``sentences`` best of ``ranked`` that score at least :data:`RELATIVE_FLOOR` of
    the best."""
    return [s for score, s in ranked[:sentences] if score >= ranked[0][0] * RELATIVE_FLOOR]


def best_quote(text: str, body: str) -> str:
    """Return the sentence of ``body`` that ``text`` (a sentence citing it) rests on most:
    the best-scoring one, else the first."""
    ranked = rank_sentences(text, {0: body})
    if ranked:
        return ranked[0][1].text
    first = split_sentences(body)
    return first[0] if first else ""
