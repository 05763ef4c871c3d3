"""Promoted results (editors' picks): pin documents to a query or a query pattern.

A promotion changes what every reader of the collection is shown first, so it is a
change to the collection: it needs the promotion permissions, a collection the user
may change, and seeing all of it (see :mod:`retrieval.services.access`), as every
editors' rule does (:mod:`retrieval.admin.relevance`). Searches
apply promotions in :mod:`retrieval.services.query.promotions`.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from retrieval.models import Promotion

from .base import COLLECTION_FILTER
from .relevance import QueryRuleForm, RuleAdminMixin


class PromotionForm(QueryRuleForm):
    class Meta:
        model = Promotion
        fields = ["collection", "query", "document", "position", "active", "note"]


@admin.register(Promotion)
class PromotionAdmin(RuleAdminMixin, admin.ModelAdmin):
    document_path = "document"
    form = PromotionForm
    list_display = ["query", "document", "collection", "position", "active", "try_it"]
    list_filter = [COLLECTION_FILTER, "active"]
    list_select_related = ["collection", "document"]
    search_fields = ["query", "document__external_id", "document__title"]
    autocomplete_fields = ["document"]

    class Media:
        css = {"all": ["retrieval/admin/admin.css"]}

    @admin.display(description="")
    def try_it(self, promotion: Promotion) -> str:
        query = " ".join(promotion.query.replace("*", " ").split())
        params = urlencode({"collection": promotion.collection_id, "query": query})
        return format_html(
            '<a href="{}?{}">try it</a>', reverse("admin:retrieval_playground"), params
        )
