from django.apps import AppConfig


class HostAppConfig(AppConfig):
    name = "tests.host_app"
    label = "host_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retrieval import host_models

        from .models import Article

        host_models.register(
            Article,
            collection="blog",
            text="{{ title }}\n\n{{ body }}",
            title="title",
            metadata=["section"],
            condition="published",
        )
