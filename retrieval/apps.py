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
        self.connect_worker_started()

    def connect_worker_started(self) -> None:
        """Sweep stale index runs as each worker of the configured queue starts."""
        from .exceptions import InvalidComponentError
        from .services.ingestion.runs import worker_started
        from .services.registry import queues

        try:
            queue = queues["default"]
        except InvalidComponentError:  # system checks name the bad setting
            return
        queue.connect_worker_started(worker_started)
