from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    label = "retrieval"
    verbose_name = "Retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import retrieval_settings

        retrieval_settings.connect_reload()
