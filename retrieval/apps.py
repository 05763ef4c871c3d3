from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    label = "retrieval"
    verbose_name = "Retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the checks, the signal receivers and the background work, by name.
        from . import checks, signals, tasks  # noqa: F401
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
