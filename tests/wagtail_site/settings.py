"""The test suite's site with Wagtail: pages indexed by retrieval.contrib.wagtail.

Run its tests with ``python -m pytest tests/wagtail_site --ds tests.wagtail_site.settings``
(``tests/test_wagtail.py`` does, in a process of their own: Django has one settings
module per process). Its test database is its own.
"""

from tests.support.settings import *  # noqa: F403

INSTALLED_APPS = [
    *INSTALLED_APPS,  # noqa: F405
    "wagtail.contrib.forms",
    "wagtail.contrib.redirects",
    "wagtail.sites",
    "wagtail.users",
    "wagtail.snippets",
    "wagtail.documents",
    "wagtail.images",
    "wagtail.search",
    "wagtail.admin",
    "wagtail",
    "wagtail.api.v2",
    "modelcluster",
    "taggit",
    "tests.wagtail_site",
    "retrieval.contrib.wagtail",
]
MIDDLEWARE = [*MIDDLEWARE, "wagtail.contrib.redirects.middleware.RedirectMiddleware"]  # noqa: F405
ROOT_URLCONF = "tests.wagtail_site.urls"
DATABASES["default"]["TEST"] = {"NAME": "test_retrieval_wagtail"}  # noqa: F405
WAGTAIL_SITE_NAME = "Retrieval test site"
WAGTAILADMIN_BASE_URL = "http://testserver"
LOGIN_URL = "wagtailadmin_login"
# Sections are not indexed here (a page type left out by the setting), so a search finds
# only articles, news and breads.
RETRIEVAL = {
    **RETRIEVAL,  # noqa: F405
    "WAGTAIL_PAGE_MODELS": {
        "wagtail_site.ArticlePage": {},
        "wagtail_site.NewsPage": {},
        # Its text is outside search_fields: chosen here, with a field in its metadata.
        "wagtail_site.BreadPage": {"text": ["introduction", "origin"], "metadata": ["origin"]},
    },
}
