"""The rewriter interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from retrieval.models import Collection
from retrieval.services.core.filters import Filters
from retrieval.services.core.tracing import current_trace
from retrieval.validation.storable import NUL

#: A conversation turn: {"role": "user" | "assistant", "content": "..."}.
Turn = dict[str, str]
#: Who speaks in a conversation's earlier turns; a turn naming no one is the user's.
HISTORY_ROLES = ("user", "assistant")
#: What callers may pass as a turn: a turn, or a plain string (an earlier user message).
TurnLike = Mapping[str, Any] | str


@dataclass(frozen=True)
class Rewrite:
    """The queries to retrieve with (results of several are fused), and why.

    ``fallback`` says the rewriter answered with the original query because its own
    method failed or gave nothing; ``reason`` then says what went wrong. ``stopped``
    holds the message when it was the query's LLM budget that ran out (a caller that
    must stop then, like the agentic loop, can). ``standalone`` is the whole question as
    one query with the conversation folded in, when the rewriter wrote one: what a
    reranker reads (:attr:`asked`), where a sub-question or a hypothetical passage
    would judge the candidates by one part of the question or by an invented answer.
    """

    original: str
    queries: tuple[str, ...]
    method: str
    fallback: bool = False
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    stopped: str = ""
    standalone: str = ""

    @property
    def asked(self) -> str:
        """What is asked, as one query: the standalone rewrite, else the original."""
        return self.standalone or self.original

    def to_dict(self) -> dict[str, Any]:
        data = {
            "original": self.original,
            "queries": list(self.queries),
            "method": self.method,
            "fallback": self.fallback,
            "reason": self.reason,
            **self.details,
        }
        if self.stopped:
            data["stopped"] = self.stopped
        if self.standalone:
            data["standalone"] = self.standalone
        return data


@dataclass(frozen=True)
class RetryFeedback:
    """What earlier rounds of a search learned, for a rewrite that must do better.

    ``tried`` are the queries already searched, ``reason`` the judge's last verdict,
    ``found`` the chunks selected so far as ``(text, score)``.
    """

    tried: tuple[str, ...]
    reason: str = ""
    found: tuple[tuple[str, float], ...] = ()

    def describe(self, chars: int = 200) -> str:
        """Render the feedback as prompt context."""
        lines = ["Already searched (write a different query, for what these did not find):"]
        lines += [f"- {query}" for query in self.tried]
        if self.reason:
            lines.append(f"Why that was not enough: {self.reason}")
        if self.found:
            lines.append("Found so far:")
            lines += [f"- {' '.join(text.split())[:chars]}" for text, _ in self.found]
        return "\n".join(lines)


class BaseQueryRewriter(ABC):
    """Turn a query (and optionally the conversation before it) into search queries."""

    alias: str = ""
    #: True when ``_rewrite`` reads the collection (and so takes ``filters``: the
    #: search's filters and access scope, which its reading must respect).
    supports_filters: bool = False
    #: True when ``_rewrite`` takes ``context`` (what the caller knows beyond the
    #: conversation); other rewriters ignore it.
    supports_context: bool = False

    def rewrite(
        self,
        query: str,
        *,
        collection: Collection,
        history: Sequence[TurnLike] | None = None,
        context: str | None = None,
        filters: Filters | None = None,
    ) -> Rewrite:
        """Return the queries to run for ``query``; never raises for a bad model answer.

        :param history: earlier turns, ``{"role", "content"}`` dicts or plain strings
            (earlier user messages).
        :param context: what the caller knows that the query does not say (the site's
            domain, what earlier searches found), for rewriters that take it.
        """
        turns = normalize_history(history)
        return self._record(self._call(query, collection, turns, context, filters))

    def refine(
        self,
        query: str,
        *,
        collection: Collection,
        feedback: RetryFeedback,
        filters: Filters | None = None,
    ) -> Rewrite:
        """Return a query for another search round, using what earlier rounds learned.

        By default the feedback is the rewrite's ``context``; a rewriter that takes no
        context rewrites as usual. A round searches one query: the agentic loop takes the
        rewrite's first (a multi-query or decomposing rewriter's others are not searched).
        """
        return self._record(self._call(query, collection, [], feedback.describe(), filters))

    def _call(
        self,
        query: str,
        collection: Collection,
        history: list[Turn],
        context: str | None,
        filters: Filters | None,
    ) -> Rewrite:
        options: dict[str, Any] = {"filters": filters} if self.supports_filters else {}
        if self.supports_context:
            options["context"] = context or ""
        return self._rewrite(query, collection=collection, history=history, **options)

    def _record(self, result: Rewrite) -> Rewrite:
        trace = current_trace()
        if trace is not None:
            trace.record("rewrite", rewriter=self.alias or type(self).__name__, **result.to_dict())
        return result

    @abstractmethod
    def _rewrite(self, query: str, *, collection: Collection, history: list[Turn]) -> Rewrite:
        """Rewrite ``query``; arguments are normalised."""

    def check(self) -> list:
        return []


def normalize_history(history: Sequence[TurnLike] | None) -> list[Turn]:
    """Return ``history`` as ``{"role", "content"}`` turns (see :func:`normalize_turn`).

    Raises ``ValueError`` naming the accepted forms for anything else.
    """
    if history is None:
        return []
    if isinstance(history, str | Mapping):
        raise ValueError(
            "history must be a list of turns: strings or {'role', 'content'} dicts, "
            f"not a single {type(history).__name__}."
        )
    turns: list[Turn] = []
    for position, turn in enumerate(history):
        try:
            turns.append(normalize_turn(turn))
        except ValueError as e:
            raise ValueError(f"history[{position}] {e}") from None
    return turns


def normalize_turn(turn: TurnLike) -> Turn:
    """Return one turn as ``{"role", "content"}``: a string is a user turn, a dict keeps
    its role if it is one of :data:`HISTORY_ROLES` (a caller never speaks as the system).

    Raises ``ValueError`` saying what a turn must be ("must be ...", "has the role ...",
    "contains a NUL character ...": a search's trace, which keeps the turns a rewriter
    used, could not be stored, as a query with one is refused).
    """
    if isinstance(turn, str):
        normalized = {"role": "user", "content": turn}
    elif isinstance(turn, Mapping) and isinstance(turn.get("content"), str):
        role = turn.get("role") or "user"
        if role not in HISTORY_ROLES:
            raise ValueError(f"has the role {role!r:.40}; a turn's role is one of {HISTORY_ROLES}.")
        normalized = {"role": role, "content": turn["content"]}
    else:
        raise ValueError(
            "must be a string or a {'role', 'content'} dict with string content, "
            f"not {turn!r:.80}."
        )
    if NUL in normalized["content"]:
        raise ValueError("contains a NUL character (\\u0000), which PostgreSQL cannot store.")
    return normalized


def format_history(history: Sequence[Turn]) -> str:
    """Render conversation turns one per line, as prompts show them."""
    return "\n".join(f"{turn.get('role', 'user')}: {turn.get('content', '')}" for turn in history)
