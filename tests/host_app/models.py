"""A host site's own model, indexed through retrieval.host_models.register (see apps.py)."""

from django.db import models


class Article(models.Model):
    title = models.CharField(max_length=200)
    body = models.TextField()
    section = models.CharField(max_length=50, default="news")
    published = models.BooleanField(default=True)

    class Meta:
        app_label = "host_app"

    def __str__(self) -> str:
        return self.title
