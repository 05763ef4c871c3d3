"""The model's side of an answer: the prompt of numbered passages, and checking its citations.

The model is asked to answer only from the passages and to cite them as ``[n]``. Its
reply is then held to that: a number that names no passage given is removed (and
reported), sentences that cite nothing are listed, and a reply that cites no passage
at all is not taken for an answer.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from retrieval.services.answers.extractive import split_sentences
from retrieval.services.llms.base import Message

#: What the model replies when the passages do not answer the question.
NOT_ANSWERED = "NOT IN PASSAGES"

INSTRUCTIONS = (
    "Answer the question using only the numbered passages. After each sentence, cite "
    "the passages it rests on by their numbers in square brackets, like [1] or [1][3]. "
    "Use no other knowledge and cite no other numbers. If the passages do not answer "
    f"the question, reply with exactly: {NOT_ANSWERED}"
)

# [3], [1, 2] or [1][2]: a marker is one bracket of numbers.
_MARKER = re.compile(r"\[\s*(\d{1,6}(?:\s*[,;]\s*\d{1,6})*)\s*\]")
_ONLY_MARKERS = re.compile(r"^(?:\s*\[[^\]]*\])+[\s.!?]*$")
# What may still become a marker when more of the stream comes.
_OPEN_MARKER = re.compile(r"\[\s*(?:\d{1,6}(?:\s*[,;]\s*\d{0,6})*\s*)?")


def build_messages(question: str, passages: Sequence[str]) -> list[Message]:
    """Return the chat messages asking ``question`` of ``passages`` (rendered ``[n] ...``)."""
    context = "\n\n".join(passages)
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Passages:\n\n{context}\n\nQuestion: {question}"},
    ]


def says_not_answered(text: str) -> bool:
    """Whether the model's reply says the passages do not answer the question."""
    return text.strip().strip(".").upper().startswith(NOT_ANSWERED)


@dataclass(frozen=True)
class Checked:
    """A reply held to its passages: its text with made-up citations removed, the passage
    numbers it cites (in order of first use), the numbers it made up, and its sentences
    that cite nothing."""

    text: str
    cited: tuple[int, ...]
    fabricated: tuple[int, ...]
    uncited: tuple[str, ...]


def check_citations(text: str, given: Collection[int]) -> Checked:
    """Return ``text`` with every ``[n]`` that names no passage of ``given`` removed."""
    cited: list[int] = []
    fabricated: list[int] = []

    def keep(match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.split(r"\s*[,;]\s*", match.group(1).strip())]
        kept = [n for n in numbers if n in given]
        fabricated.extend(n for n in numbers if n not in given)
        cited.extend(n for n in kept if n not in cited)
        return "".join(f"[{n}]" for n in kept)

    cleaned = _MARKER.sub(keep, text)
    cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned)  # "up [9]." lost its marker
    cleaned = re.sub(r"[ \t]{2,}", " ", cleaned).strip()
    return Checked(
        text=cleaned,
        cited=tuple(cited),
        fabricated=tuple(dict.fromkeys(fabricated)),
        uncited=tuple(uncited_sentences(cleaned)),
    )


def cited_sentences(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """Return the sentences of ``text`` with the passage numbers each cites; a marker
    written after the full stop (``"North is up. [1]"``) belongs to the sentence before."""
    pairs: list[tuple[str, tuple[int, ...]]] = []
    for sentence in split_sentences(text):
        numbers = tuple(
            int(n) for marker in _MARKER.findall(sentence) for n in re.split(r"\s*[,;]\s*", marker)
        )
        if pairs and _ONLY_MARKERS.match(sentence):
            previous, earlier = pairs[-1]
            pairs[-1] = (f"{previous} {sentence}", earlier + numbers)
        else:
            pairs.append((sentence, numbers))
    return pairs


def uncited_sentences(text: str) -> list[str]:
    """Return the sentences of ``text`` that cite no passage."""
    return [sentence for sentence, numbers in cited_sentences(text) if not numbers]


def without_markers(text: str) -> str:
    """Return ``text`` without its citation markers, stripped (empty: it only cites)."""
    return _MARKER.sub("", text).strip(" \t\n.,;:!?")


class MarkerGate:
    """Pass a streamed reply on as it comes, holding back what the checked text may not
    show yet: a ``[n`` until its marker is whole and checked against the passages
    ``given`` (a made-up number never passes, nor the space before a marker that loses
    all its numbers), and the opening while it may still be :data:`NOT_ANSWERED`.
    """

    def __init__(self, given: Collection[int]) -> None:
        self.given = set(given)
        self.held = ""
        self.opened = False

    def feed(self, piece: str) -> str:
        """Take the next ``piece`` of the reply; return the text now safe to show."""
        self.held += piece
        return self._release(final=False)

    def close(self) -> str:
        """Return the rest, the reply having ended."""
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        if not self.opened:
            opening = self.held.lstrip(" \t\n.").upper()
            if opening.startswith(NOT_ANSWERED):
                return ""  # an abstention shows none of its words
            if not final and NOT_ANSWERED.startswith(opening):
                return ""
            self.opened = True
        shown, position, text = [], 0, self.held
        while True:
            bracket = text.find("[", position)
            if bracket < 0:
                rest = text[position:]
                kept = rest if final else rest.rstrip()  # a space may come before a marker
                shown.append(kept)
                self.held = rest[len(kept) :]
                return "".join(shown)
            before = text[position:bracket]
            space = before[len(before.rstrip()) :]
            shown.append(before[: len(before) - len(space)])
            whole = _MARKER.match(text, bracket)
            if whole is None:
                opening = _OPEN_MARKER.match(text, bracket)
                if not final and opening is not None and opening.end() == len(text):
                    self.held = space + text[bracket:]
                    return "".join(shown)
                shown.append(space + "[")
                position = bracket + 1
                continue
            numbers = [int(n) for n in re.split(r"\s*[,;]\s*", whole.group(1).strip())]
            kept_numbers = [n for n in numbers if n in self.given]
            if kept_numbers:
                shown.append(space + "".join(f"[{n}]" for n in kept_numbers))
            position = whole.end()
