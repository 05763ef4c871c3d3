"""The retrieval screens in Wagtail's admin menu.

A Wagtail site serves Django's admin (where the app's screens are) at a path of its own,
``/django-admin/`` in Wagtail's project template, and Wagtail's admin at ``/admin/``:
editors would not find them. This adds a "Retrieval" menu to Wagtail's sidebar whose
items open those screens — the dashboard, search analytics, collections, documents,
upload, search playground, index runs, graph explorer — shown to each user only where
Django's admin lets them in (active staff holding the screen's view or change
permission). The screens themselves apply the app's access policy as on any site: each
editor sees their collections only.
"""

from __future__ import annotations

from typing import Any

from django.urls import NoReverseMatch, reverse
from wagtail import hooks
from wagtail.admin.menu import Menu, MenuItem, SubmenuMenuItem

#: (label, Django admin URL name, model whose view or change permission shows it, icon)
SCREENS = [
    ("Retrieval dashboard", "admin:app_list", "collection", "home"),
    ("Search analytics", "admin:retrieval_search_analytics", "querytrace", "table"),
    ("Collections", "admin:retrieval_collection_changelist", "collection", "folder-open-inverse"),
    ("Documents", "admin:retrieval_document_changelist", "document", "doc-full"),
    ("Upload documents", "admin:retrieval_document_add", "document", "upload"),
    ("Search playground", "admin:retrieval_playground", "collection", "search"),
    ("Index runs", "admin:retrieval_indexrun_changelist", "indexrun", "list-ul"),
    # The explorer's URL names a collection: the entity list links each collection's.
    ("Graph explorer", "admin:retrieval_entity_changelist", "entity", "link"),
]


class DjangoAdminScreen(MenuItem):
    """A link to one of the app's Django admin screens, shown where that admin lets in."""

    def __init__(self, label: str, url_name: str, model: str, icon_name: str, order: int):
        super().__init__(label, "", name=f"retrieval-{model}-{order}", icon_name=icon_name)
        self.url_name = url_name
        self.model = model
        self.order = order

    def is_shown(self, request: Any) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):  # Django's admin lets in staff only
            return False
        if self.url_name.endswith("_add"):
            allowed = user.has_perm(f"retrieval.add_{self.model}")
        else:
            allowed = user.has_perm(f"retrieval.view_{self.model}") or user.has_perm(
                f"retrieval.change_{self.model}"
            )
        if not allowed:
            return False
        try:
            kwargs = {"app_label": "retrieval"} if self.url_name == "admin:app_list" else {}
            self.url = reverse(self.url_name, kwargs=kwargs)
        except NoReverseMatch:  # the site does not serve Django's admin
            return False
        return True


@hooks.register("register_admin_menu_item")
def register_retrieval_menu() -> SubmenuMenuItem:
    items = [
        DjangoAdminScreen(label, url_name, model, icon, order)
        for order, (label, url_name, model, icon) in enumerate(SCREENS, start=1)
    ]
    return SubmenuMenuItem("Retrieval", Menu(items=items), icon_name="search", order=900)
