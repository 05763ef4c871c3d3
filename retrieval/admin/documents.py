"""Documents: upload many files at once, read a document with its chunks highlighted."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from retrieval.exceptions import AccessDenied
from retrieval.models import Document
from retrieval.services.ingestion.documents import delete_documents

from .base import COLLECTION_FILTER, ScopedAdminMixin, pretty_json, scope_of, status_badge
from .enqueue import queue_indexing, run_said
from .highlight import segments
from .reindexing import confirm_reindex, reindex_confirmed
from .uploads import UploadForm


@admin.action(description="Reindex selected documents…", permissions=["change"])
def reindex_documents(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """Say what a reindex replaces and keeps, then enqueue one run per collection."""
    modeladmin.authorize_rows(request, queryset, "change")
    if not reindex_confirmed(request):
        return confirm_reindex(modeladmin, request, queryset, action="reindex_documents")
    runs = queue_indexing(queryset, user=request.user)
    for run in runs:
        modeladmin.message_user(
            request,
            f"{run.collection}: {run.message}",
            messages.ERROR if run.documents_failed else messages.SUCCESS,
        )
    return None


@admin.action(description="Delete selected documents with their chunks", permissions=["delete"])
def delete_with_chunks(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """Ask once (with counts, not a list of every chunk), then delete in one transaction."""
    modeladmin.authorize_rows(request, queryset, "delete")
    documents = queryset.annotate(chunk_count=Count("chunks")).order_by("collection", "pk")
    if request.POST.get("confirm") == "yes":
        deleted = delete_documents(queryset, scope=scope_of(request))
        modeladmin.message_user(
            request,
            f"{deleted.get('retrieval.Document', 0)} documents and "
            f"{deleted.get('retrieval.Chunk', 0)} chunks deleted.",
            messages.SUCCESS,
        )
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Delete documents with their chunks?",
        "opts": modeladmin.opts,
        "documents": documents,
        "chunk_total": sum(d.chunk_count for d in documents),
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "retrieval/admin/document/delete_with_chunks.html", context)


@admin.register(Document)
class DocumentAdmin(ScopedAdminMixin, admin.ModelAdmin):
    document_path = "pk"
    list_display = [
        "external_id",
        "title",
        "collection",
        "mime_type",
        "status_label",
        "chunk_count",
        "indexed_at",
    ]
    list_filter = [COLLECTION_FILTER, "status", "mime_type"]
    search_fields = ["external_id", "title"]
    actions = [reindex_documents, delete_with_chunks]
    change_form_template = "retrieval/admin/document/change_form.html"
    readonly_fields = [
        "content_hash",
        "status",
        "error",
        "indexed_at",
        "created_at",
        "updated_at",
    ]
    exclude = ["content"]  # shown highlighted below the form instead

    class Media:
        css = {"all": ["retrieval/admin/admin.css"]}
        js = ["retrieval/admin/document.js"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        documents = super().get_queryset(request).select_related("collection")
        if getattr(request.resolver_match, "url_name", "") == "retrieval_document_changelist":
            documents = documents.defer("content").annotate(chunk_total=Count("chunks"))
        return documents

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Moving an indexed document would leave its chunks in the old collection.
        fixed = ["collection", "external_id", "mime_type"] if obj is not None else []
        return [*fixed, *self.readonly_fields]

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "source_file" and field is not None:
            # Django 6's admin names a file input by its fieldset's legend, which is no
            # label to assistive technology (axe-core: "Form elements must have labels").
            field.widget.attrs.setdefault("aria-label", str(db_field.verbose_name).capitalize())
        return field

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        delete_documents(Document.objects.filter(pk=obj.pk), scope=scope_of(request))

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # Django 6.1 passes where the actions show (list or change form); 5.2 does not.
        where = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **where)
        actions.pop("delete_selected", None)  # it would list every chunk on its page
        return actions

    @admin.display(description="status", ordering="status")
    def status_label(self, document: Document) -> str:
        return status_badge(document.status, document.get_status_display(), title=document.error)

    @admin.display(description="chunks", ordering="chunk_total")
    def chunk_count(self, document: Document) -> Any:
        count = getattr(document, "chunk_total", None)
        if not count:
            return count
        url = reverse("admin:retrieval_chunk_changelist") + f"?document={document.pk}"
        return format_html('<a href="{}">{}</a>', url, count)

    def save_model(self, request: HttpRequest, obj: Document, form: Any, change: bool) -> None:
        """Save an edit; a new file, title or metadata is indexed again (chunks copy them)."""
        reindex = change and {"source_file", "title", "metadata"} & set(form.changed_data)
        if reindex:
            obj.status, obj.error = Document.Status.PENDING, ""
        super().save_model(request, obj, form, change)
        if reindex:
            for run in queue_indexing([obj], user=request.user):
                level = messages.ERROR if run.documents_failed else messages.INFO
                self.message_user(request, run_said(run), level)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        """Upload one or many files; they are stored as pending documents and indexed."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        scope = scope_of(request)
        form = (
            UploadForm(request.POST, request.FILES, scope=scope)
            if request.method == "POST"
            else None
        )
        documents = None
        if form is not None and form.is_valid():
            try:
                documents = form.save()
            except AccessDenied as e:
                form.add_error(None, str(e))
        if documents is not None:
            self.message_user(request, f"{len(documents)} file(s) uploaded.", messages.SUCCESS)
            for run in queue_indexing(documents, user=request.user):
                level = messages.ERROR if run.documents_failed else messages.INFO
                self.message_user(request, run_said(run), level)
            return HttpResponseRedirect(reverse("admin:retrieval_document_changelist"))
        form = form or UploadForm(
            initial={"collection": request.GET.get("collection")}, scope=scope
        )
        context = {
            **self.admin_site.each_context(request),
            "title": "Upload documents",
            "opts": self.opts,
            "form": form,
            "media": self.media + form.media,
            "has_view_permission": self.has_view_permission(request),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "retrieval/admin/document/upload.html", context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        document = self.get_object(request, object_id)
        if document is not None:
            chunks = list(document.chunks.defer("embedding").order_by("index"))
            context.update(
                chunks=[(chunk, pretty_json(chunk.metadata)) for chunk in chunks],
                segments=segments(document.content, chunks),
                pages=sorted({c.page for c in chunks if c.page is not None}),
                chunk_browser=reverse("admin:retrieval_chunk_changelist")
                + f"?document={document.pk}",
            )
        return super().change_view(request, object_id, form_url, context)
