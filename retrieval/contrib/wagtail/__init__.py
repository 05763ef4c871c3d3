"""Wagtail integration (``pip install "django-retrieval[wagtail]"``).

Add ``"retrieval.contrib.wagtail"`` to ``INSTALLED_APPS`` after Wagtail's apps and
``"retrieval"``: every page type (or those ``RETRIEVAL["WAGTAIL_PAGE_MODELS"]`` names)
is indexed into the collection ``RETRIEVAL["WAGTAIL_COLLECTION"]`` ("pages") as
:mod:`retrieval.contrib.wagtail.pages` describes — live, unexpired pages only, their
text from Wagtail's own search configuration, who may see them from their view
restrictions, their URL in each result's metadata — and followed through publish,
unpublish, scheduled expiry, revision revert, move, slug change and delete
(:mod:`retrieval.contrib.wagtail.signals`). The retrieval screens join Wagtail's admin
menu (``wagtail_hooks``). ``retrieval_reindex --collection pages`` backfills.

Importing this package has no side effects (Django imports it to find the app); the
functions live in :mod:`retrieval.contrib.wagtail.pages`.
"""
