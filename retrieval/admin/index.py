"""The app's screens that are not model lists, listed with its models on the admin index.

Django's index lists registered models only, so the dashboard, the search analytics, the
playground and the graph explorer were reachable from the app's own pages alone. Each is
added to the app's entry of :meth:`AdminSite.get_app_list` for a user who may see the
model list it belongs to (the model's row is in the entry), so nobody is offered a screen
that refuses them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

APP_LABEL = "retrieval"
#: (name, URL name, the model whose row must be listed for the screen to be offered).
SCREENS = (
    ("Dashboard", "admin:app_list", "collection"),
    ("Search playground", "admin:retrieval_playground", "collection"),
    ("Search analytics", "admin:retrieval_search_analytics", "querytrace"),
    ("Graph explorer", "admin:retrieval_entity_changelist", "entity"),
)


def list_screens(site: AdminSite) -> None:
    """Make ``site``'s index list the app's screens beside its models (once per site)."""
    if getattr(site, "_retrieval_screens", False):
        return
    site.get_app_list = _with_screens(site)  # type: ignore[method-assign]
    site._retrieval_screens = True  # type: ignore[attr-defined]


def _with_screens(site: AdminSite) -> Callable[..., list[dict[str, Any]]]:
    get_app_list = site.get_app_list

    def get_app_list_with_screens(
        request: HttpRequest, app_label: str | None = None
    ) -> list[dict[str, Any]]:
        apps = get_app_list(request, app_label)
        for app in apps:
            if app["app_label"] == APP_LABEL:
                app["models"] = [*_screens(site, app["models"]), *app["models"]]
        return apps

    return get_app_list_with_screens


def _screens(site: AdminSite, models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return an index row per screen whose model the user may list."""
    listed = {
        entry["model"]._meta.model_name
        for entry in models
        if entry.get("admin_url") and entry.get("model") is not None
    }
    screens = []
    for name, url_name, model_name in SCREENS:
        if model_name not in listed:
            continue
        kwargs = {"app_label": APP_LABEL} if url_name == "admin:app_list" else {}
        try:
            url = reverse(url_name, kwargs=kwargs, current_app=site.name)
        except NoReverseMatch:  # this site does not serve the screen
            continue
        screens.append(
            {
                "name": name,
                # Django's index ids a row "<app>-<object_name>": "retrieval-dashboard" would
                # be the dashboard's own id on the app's page.
                "object_name": "Screen" + name.replace(" ", ""),
                "model": None,
                "admin_url": url,
                "add_url": None,
                "view_only": True,
                "perms": {"view": True},
            }
        )
    return screens
