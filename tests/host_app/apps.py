from django.apps import AppConfig


class HostAppConfig(AppConfig):
    name = "tests.host_app"
    label = "host_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retrieval import indexing

        from .models import Article

        indexing.register(
            Article,
            collection="blog",
            text="{{ title }}\n\n{{ body }}",
            title="title",
            metadata=["section"],
            condition="published",
        )
