"""``{% retrieval_dashboard %}``: the collections' cards of the app's admin landing page."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.inclusion_tag("retrieval/admin/dashboard.html", takes_context=True)
def retrieval_dashboard(context: dict[str, Any]) -> dict[str, Any]:
    """Render a card per collection the signed-in user may see (see ``admin/dashboard.py``)."""
    from retrieval.admin.dashboard import dashboard_context

    request = context.get("request")
    if request is None:  # admin templates always have it (its context processor is required)
        return {"cards": [], "missing_request": True}
    return {**dashboard_context(request), "csrf_token": context.get("csrf_token")}


@register.filter
def percent(value: float | None, digits: int = 1) -> str:
    """Return a share in [0, 1] as a percentage (``0.125`` → ``12.5%``); ``—`` for None."""
    if value is None:
        return "—"
    return f"{value * 100:.{int(digits)}f}%"
