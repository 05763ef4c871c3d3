"""Answer analytics: how a collection's grounded answers fared over a period.

An answer is a :class:`~retrieval.models.QueryTrace` holding an ``answer`` event
(:data:`ANSWERED`): readers' answers have source ``answer``, editors' keep their face's
(the playground's) and count only when editors' searches are asked for, as in search
analytics. The traces are those of :func:`~retrieval.services.quality.analytics.period_traces`
(the period, the user's scope, editors' left out by default); an answer abstained when its
``answer`` event says so (:data:`ABSTAINED`). Votes (:class:`~retrieval.models.AnswerVote`)
count on the answers of the period, whenever they were cast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Max, Q, QuerySet

from retrieval.models import AnswerVote, Collection, QueryTrace
from retrieval.services.access import Scope
from retrieval.services.quality.analytics import (
    DEFAULT_LIMIT,
    EDITORS,
    QueryRow,
    period_traces,
    report_period,
)

__all__ = ["ABSTAINED", "ANSWERED", "AnswerReport", "answer_report"]

#: The traces of answers: readers' by their source, editors' by their ``answer`` event
#: (read from the trace's JSON only for the editors' few).
ANSWERED = Q(source=QueryTrace.Source.ANSWER) | Q(
    source__in=EDITORS, trace__events__contains=[{"stage": "answer"}]
)
#: The answers that abstained (the passages found did not answer).
ABSTAINED = Q(trace__events__contains=[{"stage": "answer", "abstained": True}])


@dataclass(frozen=True)
class AnswerReport:
    """A collection's answers over a period: how many, how many abstained, the votes on
    them, and the questions most often abstained on (by their normalised query)."""

    answers: int = 0
    abstained: int = 0
    helpful: int = 0
    not_helpful: int = 0
    abstentions: list[QueryRow] = field(default_factory=list)

    @property
    def abstention_rate(self) -> float | None:
        """Return the share of answers that abstained, ``None`` without answers."""
        return self.abstained / self.answers if self.answers else None

    @property
    def votes(self) -> int:
        return self.helpful + self.not_helpful


def answer_report(
    collection: Collection | str,
    *,
    scope: Scope,
    since: datetime,
    until: datetime | None = None,
    limit: int = DEFAULT_LIMIT,
    editors: bool = False,
) -> AnswerReport:
    """Return what the answers of ``collection`` in ``[since, until)`` say; the arguments
    are :func:`~retrieval.services.quality.analytics.search_report`'s (``limit``: rows of
    the questions most often abstained on; ``editors``: the playground's answers too)."""
    target, until = report_period(collection, scope=scope, since=since, until=until)
    traces = period_traces(target, scope=scope, since=since, until=until, editors=editors)
    answers = traces.filter(ANSWERED)
    totals = answers.aggregate(answers=Count("*"), abstained=Count("created_at", filter=ABSTAINED))
    # Named apart from the field: an aggregate may not share the name it filters on.
    votes = AnswerVote.objects.filter(trace__in=answers.values("pk")).aggregate(
        up=Count("pk", filter=Q(helpful=True)), down=Count("pk", filter=Q(helpful=False))
    )
    return AnswerReport(
        **totals,
        helpful=votes["up"],
        not_helpful=votes["down"],
        abstentions=abstained_questions(answers, limit),
    )


def abstained_questions(answers: QuerySet, limit: int) -> list[QueryRow]:
    """Return the questions (by query key) most often abstained on."""
    rows = (
        answers.filter(ABSTAINED)
        .values("query_key")
        .annotate(searches=Count("*"), last_seen=Max("created_at"))
        .order_by("-searches", "query_key")[:limit]
    )
    return [
        QueryRow(query=row["query_key"], searches=row["searches"], last_seen=row["last_seen"])
        for row in rows
    ]
