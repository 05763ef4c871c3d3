"""Collections: created with their embedder's dimensions; reindex; the search playground."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError
from retrieval.models import Collection
from retrieval.services.access import Scope
from retrieval.services.indexes import outbox
from retrieval.services.ingestion.collections import (
    EDITABLE_FIELDS,
    check_name_is_free,
    create_collection,
    update_collection,
)
from retrieval.services.ingestion.runs import enqueue_run
from retrieval.services.registry import chunkers, embedders, indexes, retrievers
from retrieval.tasks import extract_graph, reembed_collection

from .base import ScopedAdminMixin, scope_of
from .enqueue import queue_reindex, run_said
from .playground import playground_view
from .reindexing import confirm_reindex, reindex_confirmed


def _choices(aliases: list[str], blank: str | None = None) -> list[tuple[str, str]]:
    return ([("", blank)] if blank is not None else []) + [(a, a) for a in aliases]


class CollectionForm(forms.ModelForm):
    """Component fields offer the configured aliases; a change the user may not make
    (see :meth:`Scope.authorize_change`) is a form error."""

    #: The requesting user's scope, set by :meth:`CollectionAdmin.get_form`.
    scope: Scope | None = None

    class Meta:
        model = Collection
        fields = [
            "name",
            "slug",
            "description",
            "embedder",
            "chunker",
            "default_retriever",
            "default_pipeline",
            "index",
            "metadata",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        fields = self.fields
        if "embedder" in fields:
            fields["embedder"] = forms.ChoiceField(choices=_choices(embedders.aliases()))
        if "index" in fields:
            fields["index"] = forms.ChoiceField(
                choices=_choices(indexes.aliases()),
                initial="default",
                required=False,
                help_text="Where the vectors are ranked; fixed once the collection exists.",
            )
        fields["chunker"] = forms.ChoiceField(
            choices=_choices(chunkers.aliases(), "(DEFAULT_CHUNKER)"), required=False
        )
        fields["default_retriever"] = forms.ChoiceField(
            choices=_choices(retrievers.aliases(), "(DEFAULT_RETRIEVER)"), required=False
        )
        fields["default_pipeline"] = forms.ChoiceField(
            choices=_choices(sorted(retrieval_settings.PIPELINES), "(DEFAULT_PIPELINE)"),
            required=False,
        )

    def clean_index(self) -> str:
        alias = self.cleaned_data.get("index") or "default"
        try:
            indexes[alias]  # a misconfigured index: say which and why
        except RetrievalError as e:
            raise forms.ValidationError(str(e)) from e
        return alias

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        name, slug = data.get("name"), data.get("slug")
        try:
            if name and "name" in self.changed_data:
                check_name_is_free(name, exclude=self.instance if self.instance.pk else None)
        except RetrievalError as e:
            self.add_error("name", str(e))
        if slug and Collection.objects.exclude(pk=self.instance.pk).filter(name=slug).exists():
            self.add_error("slug", f"A collection is called {slug!r}; choose another slug.")
        if self.scope is not None and self.instance.pk is not None:
            changes = {key: data[key] for key in self.changed_data if key in data}
            try:
                self.scope.authorize_change(self.instance, changes)
            except RetrievalError as e:
                raise forms.ValidationError(str(e)) from e
        return data

    def clean_embedder(self) -> str:
        alias = self.cleaned_data["embedder"]
        try:
            _ = embedders[alias].dimension  # a misconfigured embedder: say which and why
        except RetrievalError as e:
            raise forms.ValidationError(str(e)) from e
        return alias


@admin.action(description="Reindex selected collections…", permissions=["change"])
def reindex_collections(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """Say what a reindex replaces and keeps, then enqueue one run per collection."""
    modeladmin.authorize_rows(request, queryset, "change")
    if not reindex_confirmed(request):
        return confirm_reindex(modeladmin, request, queryset, action="reindex_collections")
    for collection in queryset:
        run = queue_reindex(collection, user=request.user)
        level = messages.ERROR if run.documents_failed else messages.SUCCESS
        modeladmin.message_user(request, run_said(run, str(collection)), level)
    return None


@admin.action(
    description="Extract the knowledge graph of selected collections", permissions=["change"]
)
def extract_graphs(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    """Enqueue one graph extraction per collection (only chunks not extracted before)."""
    modeladmin.authorize_rows(request, queryset, "change")
    for collection in queryset:
        run = enqueue_run(
            extract_graph,
            collection.pk,
            changed_only=True,
            collection=collection,
            created_by=request.user,
        )
        level = messages.ERROR if run.status == run.Status.FAILED else messages.SUCCESS
        modeladmin.message_user(
            request, f"{collection}: graph extraction, index run #{run.pk} {run.status}.", level
        )


@admin.action(
    description="Rebuild the vector index of selected collections", permissions=["change"]
)
def rebuild_indexes(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    """Record a rebuild in the outbox: the drain builds a new space from PostgreSQL and swaps."""
    modeladmin.authorize_rows(request, queryset, "change")
    for collection in queryset:
        outbox.record_rebuild(collection)
        modeladmin.message_user(
            request, f"{collection}: rebuild of index {collection.index!r} queued."
        )


class ReembedForm(forms.Form):
    embedder = forms.ChoiceField(help_text="The embedder of the new space.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["embedder"].choices = _choices(embedders.aliases())


@admin.action(description="Re-embed selected collections…", permissions=["change"])
def reembed_collections(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """Ask for the new embedder, then enqueue one re-embedding run per collection."""
    modeladmin.authorize_rows(request, queryset, "change")
    form = ReembedForm(request.POST if "apply" in request.POST else None)
    if form.is_bound and form.is_valid():
        alias = form.cleaned_data["embedder"]
        for collection in queryset:
            run = enqueue_run(
                reembed_collection,
                collection.pk,
                alias,
                collection=collection,
                created_by=request.user,
            )
            modeladmin.message_user(
                request, f"{collection}: re-embedding with {alias!r}, index run #{run.pk}."
            )
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Re-embed collections",
        "opts": modeladmin.model._meta,
        "collections": list(queryset),
        "form": form,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "retrieval/admin/collection/reembed.html", context)


@admin.register(Collection)
class CollectionAdmin(ScopedAdminMixin, admin.ModelAdmin):
    collection_path = "pk"
    form = CollectionForm
    list_display = [
        "name",
        "embedder",
        "model_name",
        "dimensions",
        "default_retriever",
        "updated_at",
        "links",
    ]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    actions = [reindex_collections, reembed_collections, extract_graphs, rebuild_indexes]
    change_list_template = "retrieval/admin/collection/change_list.html"

    class Media:
        css = {"all": ["retrieval/admin/admin.css", "retrieval/admin/quality.css"]}

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # The embedding space is fixed at creation: its vectors would not match another.
        fixed = ["embedder", "index", "index_status"] if obj is not None else []
        if obj is not None and not scope_of(request).may_create_collections():
            fixed += ["name", "slug"]  # site-wide keys: renamed only by who may create
        return [*fixed, "model_name", "dimensions", "created_at", "updated_at"]

    def get_prepopulated_fields(self, request: HttpRequest, obj: Any = None) -> dict:
        # A read-only slug is not in the form, and Django fails the page on a prepopulated
        # field it cannot find.
        if "slug" in self.get_readonly_fields(request, obj):
            return {}
        return super().get_prepopulated_fields(request, obj)

    @admin.display(description="Index status")
    def index_status(self, collection: Collection) -> str:
        """The index backend, its pending outbox operations and their last error, and the
        scopes with an index of their own (``retrieval_scope_index``)."""
        if collection.index not in indexes:
            return format_html("<strong>Index {} is not configured.</strong>", collection.index)
        index = indexes[collection.index]
        state = outbox.pending(collection.pk)
        scopes = ", ".join(
            scope.get("access") or json.dumps(scope["metadata"])
            for scope in collection.scope_indexes
        )
        return format_html(
            "{} ({}{}) · {} pending operations{}{}{}",
            type(index).__name__,
            "in PostgreSQL" if index.features.transactional else "external",
            f", space {collection.index_space}" if collection.index_space else "",
            state["count"],
            f", oldest from {state['oldest']:%Y-%m-%d %H:%M:%S}" if state["oldest"] else "",
            format_html(" · last error: <code>{}</code>", state["last_error"])
            if state["last_error"]
            else "",
            f" · scope indexes: {scopes}" if scopes else "",
        )

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> type:
        form = super().get_form(request, obj, **kwargs)
        form.scope = scope_of(request)  # a class made for this request
        return form

    def save_model(self, request: HttpRequest, obj: Collection, form: Any, change: bool) -> None:
        if not change:
            create_collection(obj)
            return
        changes = {key: getattr(obj, key) for key in form.changed_data if key in EDITABLE_FIELDS}
        update_collection(obj, changes, scope=scope_of(request))

    def response_action(
        self, request: HttpRequest, queryset: QuerySet, **options: Any
    ) -> HttpResponse | None:
        """Run an action; one posted from the dashboard goes back there (its ``next``).

        ``options``: what Django passes on (6.1 adds ``action_location``).
        """
        response = super().response_action(request, queryset, **options)
        back = request.POST.get("next", "")
        if isinstance(response, HttpResponseRedirect) and url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return HttpResponseRedirect(back)
        return response

    def get_urls(self) -> list:
        playground = path(
            "playground/",
            self.admin_site.admin_view(self.playground),
            name="retrieval_playground",
        )
        return [playground, *super().get_urls()]

    def playground(self, request: HttpRequest) -> HttpResponse:
        return playground_view(self, request)

    @admin.display(description="")
    def links(self, collection: Collection) -> str:
        return format_html(
            '<a href="{}?collection__id__exact={}">documents</a> · '
            '<a href="{}?collection={}">upload</a> · <a href="{}?collection={}">search</a>',
            reverse("admin:retrieval_document_changelist"),
            collection.pk,
            reverse("admin:retrieval_document_add"),
            collection.pk,
            reverse("admin:retrieval_playground"),
            collection.pk,
        )
