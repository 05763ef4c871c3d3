"""``{% judge_buttons collection query chunk %}``: mark a result relevant or not in a golden set."""

from __future__ import annotations

from typing import Any

from django import template

from retrieval.models import Chunk, Collection, EvalSet, Judgment
from retrieval.services.goldens import target_of
from retrieval.services.scope import Scope

register = template.Library()


@register.inclusion_tag("retrieval/admin/quality/judge_buttons.html", takes_context=True)
def judge_buttons(
    context: dict[str, Any], collection: Collection | None, query: str, chunk: Chunk
) -> dict[str, Any]:
    """Render the buttons that judge ``chunk`` for ``query`` in one of the collection's sets."""
    request = context.get("request")
    sets = list(EvalSet.objects.filter(collection=collection)) if collection else []
    if request is not None and Scope.for_user(request.user).documents is not None:
        sets = []  # golden sets are closed to staff restricted to some documents
    judged = []
    for eval_set in sets:
        judgment = Judgment.objects.filter(
            query__eval_set=eval_set, query__text=query, target=target_of(eval_set, chunk)
        ).first()
        if judgment is not None:
            judged.append((eval_set.name, judgment))
    return {
        "sets": sets,
        "judged": judged,
        "query": query,
        "chunk": chunk,
        "csrf_token": context.get("csrf_token"),
        "next": request.get_full_path() if request is not None else "",
    }
