"""Integrations with other Django apps, each an optional extra (``retrieval.contrib.wagtail``)."""
