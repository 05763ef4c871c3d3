from django.apps import AppConfig


class RetrievalWagtailConfig(AppConfig):
    """Index a Wagtail site's live pages; the retrieval screens in Wagtail's admin."""

    name = "retrieval.contrib.wagtail"
    label = "retrieval_wagtail"
    verbose_name = "Retrieval for Wagtail"

    def ready(self) -> None:
        from . import pages, signals

        pages.register_pages()
        signals.connect()
