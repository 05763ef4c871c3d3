"""A plain search page: pick a collection, type a query, read the ranked chunks.

It requires a signed-in user unless ``RETRIEVAL["SEARCH_PAGE_PUBLIC"]`` is True, and
lists and searches only what the visitor's :class:`Scope` may see. Visitors are sent
to the site's ``LOGIN_URL`` when it names a view of the site (not a catch-all such as
Wagtail's page serving), else to the app's own sign-in page (:class:`LoginView`, with
its own template), so a site with no login view or ``registration/login.html`` still
works.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch, Resolver404, resolve, reverse
from django.views.generic import TemplateView

from .conf import retrieval_settings
from .exceptions import RetrievalError


class SearchView(TemplateView):
    template_name = "retrieval/search.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not retrieval_settings.SEARCH_PAGE_PUBLIC and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url())
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from .models import QueryTrace
        from .services.access import Scope
        from .services.quality.search_log import traced_as, untraced
        from .services.query.search import search

        context = super().get_context_data(**kwargs)
        scope = Scope.for_request(self.request)
        collections = list(scope.visible_collections().order_by("name"))
        query = self.request.GET.get("q", "").strip()
        selected = self.request.GET.get("collection") or (
            collections[0].name if collections else ""
        )
        results, error = [], ""
        if query and selected:
            try:
                with traced_as(QueryTrace.Source.PAGE), untraced(cross_site(self.request)):
                    results = search(query, collection=selected, scope=scope, top_k=10)
            except (RetrievalError, ValueError) as e:
                error = str(e)
        context.update(
            collections=collections, query=query, selected=selected, results=results, error=error
        )
        return context


class LoginView(auth_views.LoginView):
    """Sign in with the app's own template; back to the search page by default."""

    template_name = "retrieval/login.html"

    def get_default_redirect_url(self) -> str:
        if settings.LOGIN_REDIRECT_URL != "/accounts/profile/":  # Django's default: none set
            return resolve_url(settings.LOGIN_REDIRECT_URL)
        return reverse("retrieval:search")


def cross_site(request: HttpRequest) -> bool:
    """Tell whether another site's page sent this request (a link, a form, an image).

    A search any page can make a signed-in visitor's browser run is still answered, but
    it is not kept as that visitor's trace: it would plant queries in the analytics.
    Browsers say where a request comes from in ``Sec-Fetch-Site``; older ones in
    ``Referer``; a request with neither (typed, bookmarked, a script) counts as the site's.
    """
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site not in ("same-origin", "none")
    referer = urlsplit(request.headers.get("Referer", ""))
    return bool(referer.netloc) and referer.netloc != request.get_host()


def login_url() -> str:
    """Return the site's ``LOGIN_URL`` if a view of the site answers it, else the app's.

    A catch-all pattern (Wagtail's page serving, a single-page app's) resolves every
    path and answers Django's default ``/accounts/login/`` with a 404: a path counts as
    answered only when a sibling that cannot exist does not resolve to the same pattern.
    """
    try:
        url = resolve_url(settings.LOGIN_URL)
    except NoReverseMatch:
        return reverse("retrieval:login")
    parts = urlsplit(url)
    if parts.netloc:  # another host: the site knows what it does
        return url
    return url if _answered(parts.path) else reverse("retrieval:login")


def _answered(path: str) -> bool:
    """True if a pattern of its own (not a catch-all) resolves ``path``."""
    try:
        match = resolve(path)
    except Resolver404:
        return False
    sibling = f"{path.rstrip('/').rpartition('/')[0]}/{uuid.uuid4().hex}/"
    try:
        other = resolve(sibling)
    except Resolver404:
        return True
    return (other.func, other.route) != (match.func, match.route)
