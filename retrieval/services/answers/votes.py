"""Votes on answers: the asker says whether an answer helped.

Only the signed-in user who asked may vote on an answer, and only while its trace is in
their scope: an answer of someone else, of a collection or trace hidden from them, or a
trace that holds no answer raises :class:`AnswerNotFound` alike. A second vote on the
same answer changes the first. An answer whose trace was not kept
(``TRACE_SAMPLE_RATE``) has no ``trace_id`` and cannot be voted on.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from retrieval.exceptions import RetrievalError
from retrieval.models import AnswerVote, QueryTrace
from retrieval.services.access import Scope
from retrieval.services.quality.answer_analytics import ANSWERED

__all__ = ["AnswerNotFound", "votable_answers", "vote_on_answer"]


class AnswerNotFound(RetrievalError, LookupError):
    """No answer of this id that the user asked and may see."""


def votable_answers(user: Any, scope: Scope) -> QuerySet[QueryTrace]:
    """Return the answers' traces ``user`` may vote on: their own, within ``scope``."""
    if not getattr(user, "is_authenticated", False):
        return QueryTrace.objects.none()
    return scope.restrict_traces(QueryTrace.objects.filter(ANSWERED, user=user.pk))


def vote_on_answer(trace_id: int, *, user: Any, scope: Scope, helpful: bool) -> AnswerVote:
    """Record ``user``'s vote on the answer traced as ``trace_id`` (a second vote changes
    the first) and return it; raise :class:`AnswerNotFound` if they may not vote on it."""
    with transaction.atomic():
        trace = votable_answers(user, scope).filter(pk=trace_id).first()
        if trace is None:
            raise AnswerNotFound("No answer of yours has this trace_id.")
        vote, _ = AnswerVote.objects.update_or_create(
            trace=trace, user_id=user.pk, defaults={"helpful": helpful}
        )
    return vote
