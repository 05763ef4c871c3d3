"""A real headless Chromium (Debian's ``chromium``) driven by Playwright, for screen tests.

Use the ``browser_page`` fixture with pytest-django's ``live_server``::

    def test_page(browser_page, live_server, admin_login):
        page = browser_page
        page.goto(live_server.url + "/admin/")

``admin_login(page, live_server)`` signs a superuser in through the real login form.
Screenshots go to ``test-artifacts/`` (see ``screenshot``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def chromium_path() -> str:
    """Return the system Chromium; ``dev.py test`` installs it from Debian when missing."""
    path = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if not path:
        raise RuntimeError("Chromium is not installed: run `apt-get install chromium`.")
    return path


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    """One Chromium for the session.

    Playwright's sync API keeps an event loop running in the test thread, which makes
    Django refuse ORM calls there unless ``DJANGO_ALLOW_ASYNC_UNSAFE`` is set; it is set
    only while the browser runs.
    """
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_path(), args=CHROMIUM_FLAGS
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def browser_page(chromium) -> Iterator[object]:
    """A fresh browser context and page."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def signed_in(chromium, live_server, django_user_model) -> Iterator[Callable[..., object]]:
    """Return ``open(viewport, username, **options)``: a page in a new browser context of
    ``viewport``'s size, ``username`` signed in by a session cookie (the login forms have
    tests of their own); ``options`` go to ``new_context``. The contexts close at teardown."""
    from django.conf import settings
    from django.test import Client

    contexts = []

    def open_page(viewport: dict, username: str, **options: object) -> object:
        client = Client()
        client.force_login(django_user_model.objects.get(username=username))
        context = chromium.new_context(viewport=viewport, **options)
        context.set_default_timeout(20_000)
        contexts.append(context)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
        name = settings.SESSION_COOKIE_NAME
        context.add_cookies([{"name": name, "value": cookie, "url": live_server.url}])
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def admin_login(django_user_model) -> Callable[[object, object], object]:
    """Return ``login(page, live_server)``: create a superuser and sign in via the form."""

    def login(page, live_server) -> object:
        username_field = django_user_model.USERNAME_FIELD
        user = django_user_model(**{username_field: "browser-admin"})
        user.is_staff = user.is_superuser = True
        user.set_password("browser-pass")
        user.save()
        sign_in(page, live_server, "browser-admin", "browser-pass")
        return user

    return login


def sign_in(page, live_server, username: str, password: str) -> None:
    """Sign ``username`` in through the admin's login form."""
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")
