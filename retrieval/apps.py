from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    label = "retrieval"
    verbose_name = "Retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registers checks and receivers)
        from .conf import retrieval_settings

        retrieval_settings.connect_reload()
