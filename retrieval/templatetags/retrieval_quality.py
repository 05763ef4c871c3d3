"""``{% judge_buttons collection query chunk %}``: mark a result relevant or not in a golden set."""

from __future__ import annotations

import itertools
from typing import Any

from django import template

from retrieval.admin.base import EDIT_GOLDEN
from retrieval.models import Chunk, Collection, EvalSet, Judgment
from retrieval.services.access import Scope
from retrieval.services.quality.goldens import target_of

register = template.Library()


@register.inclusion_tag("retrieval/admin/quality/judge_buttons.html", takes_context=True)
def judge_buttons(
    context: dict[str, Any], collection: Collection | None, query: str, chunk: Chunk
) -> dict[str, Any]:
    """Render the buttons that judge ``chunk`` for ``query`` in one of the collection's sets."""
    request = context.get("request")
    scope = Scope.for_request(request) if request is not None else None
    sets = []
    # Golden sets are closed to staff restricted to some documents, and judging is a
    # write the access policy must allow.
    if collection and scope and scope.documents is None:
        if scope.may_write(*EDIT_GOLDEN, collection):
            sets = list(EvalSet.objects.filter(collection=collection))
    judged = []
    for eval_set in sets:
        judgment = Judgment.objects.filter(
            query__eval_set=eval_set, query__text=query, target=target_of(eval_set, chunk)
        ).first()
        if judgment is not None:
            judged.append((eval_set.name, judgment))
    # Each form gets an id of the page, and judging comes back to it: the editor keeps
    # their place (and keyboard users their focus point) instead of starting at the top.
    forms = context.render_context.setdefault("retrieval_judge_forms", itertools.count(1))
    anchor = f"retrieval-judge-{next(forms)}"
    back = request.get_full_path() if request is not None else ""
    return {
        "sets": sets,
        "judged": judged,
        "query": query,
        "chunk": chunk,
        "csrf_token": context.get("csrf_token"),
        "anchor": anchor,
        "next": f"{back}#{anchor}" if back else "",
    }
