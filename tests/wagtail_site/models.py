"""A small Wagtail site's page types: rich text, a StreamField, a child page type."""

from django.db import models
from wagtail import blocks
from wagtail.admin.panels import FieldPanel
from wagtail.fields import RichTextField, StreamField
from wagtail.models import Page
from wagtail.search import index


class SectionPage(Page):
    """A section: restrictions and moves apply to its descendants."""

    template = "wagtail_site/page.html"


class ArticlePage(Page):
    intro = RichTextField(blank=True)
    body = StreamField(
        [("heading", blocks.CharBlock()), ("paragraph", blocks.RichTextBlock())], blank=True
    )

    search_fields = Page.search_fields + [index.SearchField("intro"), index.SearchField("body")]
    content_panels = Page.content_panels + [FieldPanel("intro"), FieldPanel("body")]
    template = "wagtail_site/page.html"


class NewsPage(ArticlePage):
    """A child page type of ArticlePage (multi-table inheritance below Page)."""

    dateline = models.CharField(max_length=100, blank=True)

    search_fields = ArticlePage.search_fields + [index.SearchField("dateline")]
    content_panels = ArticlePage.content_panels + [FieldPanel("dateline")]


class BreadPage(Page):
    """A page type whose text lives outside ``search_fields`` (bakerydemo's bread pages:
    Wagtail's search indexes their title alone)."""

    introduction = models.TextField(blank=True)
    origin = models.CharField(max_length=100, blank=True)

    content_panels = Page.content_panels + [FieldPanel("introduction"), FieldPanel("origin")]
    template = "wagtail_site/page.html"
