"""A plain search page: pick a collection, type a query, read the ranked chunks.

It requires a signed-in user unless ``RETRIEVAL["SEARCH_PAGE_PUBLIC"]`` is True, and
lists and searches only what the visitor's :class:`Scope` may see. Visitors are sent
to the site's ``LOGIN_URL`` when it names a view of the site (not a catch-all such as
Wagtail's page serving), else to the app's own sign-in page (:class:`LoginView`, with
its own template), so a site with no login view or ``registration/login.html`` still
works.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import render, resolve_url
from django.urls import NoReverseMatch, Resolver404, resolve, reverse
from django.views.generic import TemplateView

from .conf import retrieval_settings
from .exceptions import CollectionNotFound, RetrievalError, ServiceUnavailableError

logger = logging.getLogger(__name__)

#: What a reader is told while the database does not answer (a restart, a failover), in
#: the API's words; ``Retry-After`` is the API's too.
UNAVAILABLE = "The database did not answer. Try again shortly."
RETRY_AFTER = "5"


class ReaderMixin:
    """Require a signed-in user unless ``SEARCH_PAGE_PUBLIC``; JSON asks get a 403.

    A request the database drops is a 503 with ``Retry-After``, as in the API, not a 500.
    """

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            if not retrieval_settings.SEARCH_PAGE_PUBLIC and not request.user.is_authenticated:
                if wants_json(request):
                    return JsonResponse({"detail": "Sign in to search."}, status=403)
                return redirect_to_login(request.get_full_path(), login_url())
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        except (OperationalError, InterfaceError):
            logger.warning("The database dropped a request for %s", request.path, exc_info=True)
            return unavailable(request)


def unavailable(request: HttpRequest) -> HttpResponse:
    """Answer 503 with ``Retry-After``: the page's own, or JSON for ``?format=json``."""
    if wants_json(request):
        response: HttpResponse = JsonResponse(
            {"detail": UNAVAILABLE, "code": "database_unavailable"}, status=503
        )
    else:
        context = {"message": UNAVAILABLE, "retry": request.get_full_path()}
        response = render(request, "retrieval/unavailable.html", context, status=503)
    response["Retry-After"] = RETRY_AFTER
    return response


class SearchView(ReaderMixin, TemplateView):
    """The results page; ``?format=json`` answers the same view as JSON, for sites that
    embed search in their own pages."""

    template_name = "retrieval/search.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        context = self.get_context_data(**kwargs)
        if wants_json(request):
            return JsonResponse(search_json(context), status=context["status"])
        return self.render_to_response(context, status=context["status"])

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from .models import QueryTrace
        from .services.access import Scope
        from .services.query.search_log import traced_as, untraced
        from .services.results.page import results_page

        context = super().get_context_data(**kwargs)
        request = self.request
        scope = Scope.for_request(request)
        collections = list(scope.visible_collections().order_by("name"))
        query = request.GET.get("q", "").strip()
        selected = request.GET.get("collection") or (collections[0].name if collections else "")
        page, error, status = None, "", 200
        if query and selected:
            try:
                number, chosen = page_number(request), chosen_facets(request)
                with traced_as(QueryTrace.Source.PAGE), untraced(cross_site(request)):
                    page = results_page(
                        query, collection=selected, scope=scope, number=number, selected=chosen
                    )
            except CollectionNotFound as e:
                error = str(e)
            except ServiceUnavailableError as e:
                error, status = str(e), 503
            except (RetrievalError, ValueError) as e:
                error, status = str(e), 400
        box, answer_error = None, ""
        offered = bool(retrieval_settings.SEARCH_PAGE_ANSWERS)
        if offered and page is not None and page.number == 1 and request.GET.get("answer"):
            # Traced as the page's, as its search is (and, from another site, not at all).
            with traced_as(QueryTrace.Source.PAGE), untraced(cross_site(request)):
                box, answer_error = ask(query, page, scope, chosen_facets(request))
        context.update(
            collections=collections,
            query=query,
            selected=selected,
            page=page,
            answer=box,
            answer_error=answer_error,
            answer_url=with_params(request, answer="1", page=None) if page else "",
            answer_stream=answer_stream(request, query, page),
            answer_vote=answer_vote(request, page),
            answers_offered=bool(retrieval_settings.SEARCH_PAGE_ANSWERS),
            suggest_url=suggest_url(request),
            results=page.groups if page else [],
            error=error,
            status=status,
            **result_tools(request, scope, page),
        )
        return context


class DocumentView(ReaderMixin, TemplateView):
    """A document's text, each chunk anchored (``#chunk-<index>``), for results with no
    page of their own; a document hidden from the reader is a 404 like a missing one."""

    template_name = "retrieval/document.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from .admin.highlight import segments
        from .models import Document
        from .services.access import Scope

        context = super().get_context_data(**kwargs)
        scope = Scope.for_request(self.request)
        documents = Document.objects.select_related("collection").filter(pk=kwargs["pk"])
        document = scope.restrict(documents, document="pk").first()
        if document is None:
            raise Http404("No such document.")
        chunks = list(document.chunks.order_by("index"))
        context.update(document=document, segments=segments(document.content, chunks))
        return context


def ask(query: str, page: Any, scope: Any, facets: dict[str, str]) -> tuple[Any, str]:
    """Return the answer box for ``query`` over the page's collection and facets, or why
    there is none; an answer is only ever made of what ``scope`` sees."""
    from .services.answers.service import answer
    from .services.results.answer_box import answer_box
    from .services.results.facets import facet_filter

    metadata = facet_filter(page.facets) if facets else {}
    try:
        made = answer(
            query,
            collection=page.collection,
            scope=scope,
            filters={"metadata": metadata} if metadata else None,
        )
    except (RetrievalError, ValueError) as e:  # a service down, a bad setting: said on the page
        return None, str(e)
    return answer_box(made), ""


def answer_stream(request: HttpRequest, query: str, page: Any) -> dict[str, Any] | None:
    """Return what the page's script posts to stream the answer from the API (the body
    and the CSRF token), or ``None`` when it cannot: no API mounted, nobody signed in
    (the API answers readers who are), no results."""
    from .services.results.facets import facet_filter

    url = api_url("retrieval-api:answer")
    if page is None or not url or not request.user.is_authenticated:
        return None
    metadata = facet_filter(page.facets)
    body = {"question": query, "collection": page.collection.name, "stream": True}
    if metadata:
        body["filters"] = {"metadata": metadata}
    return {"url": url, "body": body, "csrf": get_token(request)}


def suggest_url(request: HttpRequest) -> str:
    """Return the query suggestions endpoint the search box's script asks as the reader
    types, or "" when it cannot: no API mounted, nobody signed in (the API answers readers
    who are). What each reader is offered is the endpoint's to decide."""
    return api_url("retrieval-api:suggest") if request.user.is_authenticated else ""


def answer_vote(request: HttpRequest, page: Any) -> dict[str, Any] | None:
    """Return where the answer box's helpful / not helpful votes go (the feedback API,
    with the CSRF token), or ``None`` with no answer box: only a signed-in reader votes,
    on their answer."""
    url = api_url("retrieval-api:feedback")
    offered = page is not None and retrieval_settings.SEARCH_PAGE_ANSWERS
    if not offered or not url or not request.user.is_authenticated:
        return None
    return {"url": url, "csrf": get_token(request)}


def wants_json(request: HttpRequest) -> bool:
    return request.GET.get("format") == "json"


def page_number(request: HttpRequest) -> int:
    """Return the ``page`` asked for (1 if none); ``ValueError`` if it is not a number."""
    raw = request.GET.get("page") or "1"
    if not raw.isdigit() or len(raw) > 4:
        raise ValueError("The page must be a whole number.")
    return int(raw)


def chosen_facets(request: HttpRequest) -> dict[str, str]:
    """Return the facet values asked for: ``facet=key:value``, one value per key."""
    chosen = {}
    for item in request.GET.getlist("facet"):
        key, colon, value = item.partition(":")
        if not colon or not key or not value:
            raise ValueError(f"A facet is key:value, not {item!r}.")
        chosen[key] = value
    return chosen


def result_tools(request: HttpRequest, scope: Any, page: Any) -> dict[str, Any]:
    """Return what the page offers around its results: links to the pages before and
    after, the facets' links, and the click and vote endpoints with what they need (a
    signed-in reader's posts carry the CSRF token, given for sites' own scripts)."""
    from .models import Judgment
    from .services.results.clicks import click_token

    tools: dict[str, Any] = {"previous_url": "", "next_url": "", "facets": [], "click": None}
    tools["vote"] = None
    if page is None:
        return tools
    if page.number > 1:
        tools["previous_url"] = with_params(request, page=page.number - 1)
    if page.has_next:
        tools["next_url"] = with_params(request, page=page.number + 1)
    chosen = request.GET.getlist("facet")
    for facet in page.facets:
        values = []
        for value in facet.values:
            item = f"{facet.key}:{value.value}"
            others = [c for c in chosen if not c.startswith(f"{facet.key}:")]
            toggled = others if value.selected else [*others, item]
            values.append({"value": value, "url": with_params(request, page=None, facet=toggled)})
        tools["facets"].append({"facet": facet, "values": values})
    if page.groups and page.trace_id is not None:
        url = api_url("retrieval-api:click")
        if url:
            token = click_token(page.trace_id, request.user)
            tools["click"] = {"url": url, "token": token, "csrf": get_token(request)}
    if page.groups and scope.may_write("add", Judgment, page.collection, whole=False):
        url = api_url("retrieval-api:feedback")
        if url:
            tools["vote"] = {
                "url": url,
                "collection": page.collection.slug,
                "csrf": get_token(request),
            }
    return tools


def with_params(request: HttpRequest, **changes: Any) -> str:
    """Return this page's query string with ``changes`` (None: removed; a list: repeated)."""
    params = request.GET.copy()
    for key, value in changes.items():
        params.pop(key, None)
        if isinstance(value, list):
            params.setlist(key, value)
        elif value is not None:
            params[key] = str(value)
    return f"{request.path}?{params.urlencode()}"


def api_url(name: str) -> str:
    """Return the URL of an API endpoint, or "" for a site that does not mount the API."""
    try:
        return reverse(name)
    except NoReverseMatch:
        return ""


def search_json(context: dict[str, Any]) -> dict[str, Any]:
    """Return the results page as JSON: what the template shows, in the same order."""
    page = context["page"]
    return {
        "query": context["query"],
        "collection": context["selected"],
        "collections": [c.name for c in context["collections"]],
        "error": context["error"],
        "page": page.number if page else None,
        "previous": context["previous_url"] or None,
        "next": context["next_url"] or None,
        "results": [group.to_dict() for group in context["results"]],
        "facets": [facet.to_dict() for facet in page.facets] if page else [],
        "click": context["click"],
        "vote": context["vote"],
        "answer": context["answer"].to_dict() if context["answer"] else None,
        "answer_vote": context["answer_vote"],
    }


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
