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


class Entry(models.Model):
    """A parent table: a Story is an Entry too (multi-table inheritance)."""

    title = models.CharField(max_length=200)
    published = models.BooleanField(default=True)

    class Meta:
        app_label = "host_app"

    def __str__(self) -> str:
        return self.title


class Story(Entry):
    """Indexed through its parent's saves as well as its own (see apps.py)."""

    slug = models.SlugField(max_length=100)
    body = models.TextField(help_text="HTML")
    #: Who may read it: "public", "members" (signed in), "group:<name>", "nobody".
    audience = models.CharField(max_length=100, default="public")

    class Meta:
        app_label = "host_app"

    def get_absolute_url(self) -> str:
        return f"/stories/{self.slug}/"

    def visible_to(self):
        from django.contrib.auth.models import Group

        from retrieval.services.visibility import Visibility

        if self.audience == "members":
            return "signed-in"
        if self.audience.startswith("group:"):
            return Visibility.groups(Group.objects.filter(name=self.audience[6:]))
        return self.audience


class StoryProxy(Story):
    """The same rows through another class."""

    class Meta:
        proxy = True
        app_label = "host_app"
