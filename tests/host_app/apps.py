from django.apps import AppConfig


class HostAppConfig(AppConfig):
    name = "tests.host_app"
    label = "host_app"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models import Q

        from retrieval import host_models

        from .models import Article, Story

        host_models.register(
            Article,
            collection="blog",
            text="{{ title }}\n\n{{ body }}",
            title="title",
            metadata=["section"],
            condition="published",
        )
        host_models.register(
            Story,
            collection="stories",
            text="{{ title }}\n\n{{ body|safe }}",  # the body is HTML: marked safe, read as text
            title="title",
            condition=Q(published=True),
            visibility="visible_to",
        )
