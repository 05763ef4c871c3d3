"""Index runs, with progress the changelist refreshes in place from a JSON endpoint."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from retrieval.exceptions import RetrievalError
from retrieval.models import IndexRun
from retrieval.services.ingestion.runs import cancel_run, retry_run

from .base import COLLECTION_FILTER, ReadOnlyAdmin, ScopedAdminMixin, scope_of, status_badge
from .enqueue import run_said

#: Runs one progress request may ask about.
MAX_RUNS_PER_POLL = 200
#: What a run's counts count, by task: graph extraction reads chunks and writes triples.
UNITS = {"graph": ("chunks", "triples")}
DEFAULT_UNITS = ("documents", "chunks")


def run_progress(run: IndexRun) -> dict[str, Any]:
    """Return what the changelist shows of a run, as JSON-ready values."""
    return {
        "id": run.pk,
        "status": run.status,
        "status_label": run.get_status_display(),
        "done": run.documents_done,
        "total": run.documents_total,
        "indexed": run.documents_indexed,
        "skipped": run.documents_skipped,
        "failed": run.documents_failed,
        "chunks": run.chunks_written,
        "units": list(UNITS.get(run.task, DEFAULT_UNITS)),
        "message": run.message,
        "active": run.status in (IndexRun.Status.QUEUED, IndexRun.Status.RUNNING),
    }


@admin.action(description="Cancel selected runs", permissions=["run"])
def cancel_runs(modeladmin: IndexRunAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    """Cancel the queued or running ones (a running run stops before its next document)."""
    modeladmin.authorize_rows(request, queryset, "change")
    for run in queryset.order_by("pk"):
        if cancel_run(run):
            modeladmin.message_user(request, f"Index run #{run.pk} cancelled.")
        else:
            modeladmin.message_user(
                request, f"Index run #{run.pk} already ended: it {run.status}.", messages.WARNING
            )


@admin.action(description="Retry selected runs (their failed documents)", permissions=["run"])
def retry_runs(modeladmin: IndexRunAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    """Enqueue again what failed in each run: its failed documents, or the run as asked."""
    modeladmin.authorize_rows(request, queryset, "change")
    for run in queryset.order_by("pk"):
        try:
            new = retry_run(run, created_by=request.user)
        except RetrievalError as e:
            modeladmin.message_user(request, str(e), messages.WARNING)
            continue
        level = messages.ERROR if new.status == IndexRun.Status.FAILED else messages.SUCCESS
        said = run_said(new, f"Retry of run #{run.pk}")
        modeladmin.message_user(request, said, level)


@admin.register(IndexRun)
class IndexRunAdmin(ScopedAdminMixin, ReadOnlyAdmin):
    list_display = [
        "pk",
        "task",
        "collection",
        "status_label",
        "progress",
        "documents_failed",
        "chunks_written",
        "created_at",
        "duration",
    ]
    list_filter = ["status", "task", COLLECTION_FILTER]
    list_select_related = ["collection"]
    actions = [cancel_runs, retry_runs]
    readonly_fields = ["error_table", "resumed_as"]
    exclude = ["errors"]  # shown once, as the table of ``error_table``

    class Media:
        css = {"all": ["retrieval/admin/admin.css"]}
        js = ["retrieval/admin/runs.js"]

    def get_urls(self) -> list:
        progress = path(
            "progress/",
            self.admin_site.admin_view(self.progress_view),
            name="retrieval_indexrun_progress",
        )
        return [progress, *super().get_urls()]

    def progress_view(self, request: HttpRequest) -> JsonResponse:
        """Return the progress of the runs in ``?ids=1,2,3`` (staff only)."""
        if not self.has_view_permission(request):
            return JsonResponse({"error": "You may not view index runs."}, status=403)
        raw = [part for part in request.GET.get("ids", "").split(",") if part]
        if not all(part.isdigit() for part in raw) or len(raw) > MAX_RUNS_PER_POLL:
            return JsonResponse(
                {"error": f"ids is a comma-separated list of at most {MAX_RUNS_PER_POLL} ids."},
                status=400,
            )
        runs = self.get_queryset(request).filter(pk__in=[int(part) for part in raw]).order_by("pk")
        return JsonResponse({"runs": [run_progress(run) for run in runs]})

    def has_run_permission(self, request: HttpRequest) -> bool:
        """Whether the user may cancel or retry runs (``change_indexrun``, as in the API);
        each run's collection is checked when the action runs."""
        return scope_of(request).may("change", IndexRun)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # A run's errors name its documents: under a document restriction staff see only
        # the runs they started (the access policy's rule for runs).
        return scope_of(request).restrict_runs(super(ScopedAdminMixin, self).get_queryset(request))

    @admin.display(description="status", ordering="status")
    def status_label(self, run: IndexRun) -> str:
        badge = status_badge(run.status, run.get_status_display(), title=run.message)
        return format_html('<span data-retrieval-run-status="{}">{}</span>', run.pk, badge)

    @admin.display(description="progress")
    def progress(self, run: IndexRun) -> str:
        data = run_progress(run)
        return format_html(
            '<div class="retrieval-progress" data-retrieval-run="{}" data-active="{}" '
            'data-url="{}"><progress max="{}" value="{}"></progress>'
            '<span class="retrieval-progress-text">{}</span></div>',
            run.pk,
            "1" if data["active"] else "",
            reverse("admin:retrieval_indexrun_progress"),
            max(run.documents_total, 1),
            run.documents_done,
            progress_text(data),
        )

    @admin.display(description="duration")
    def duration(self, run: IndexRun) -> str:
        seconds = run.duration_seconds
        return "" if seconds is None else f"{seconds:.1f} s"

    @admin.display(description="resumed as")
    def resumed_as(self, run: IndexRun) -> str:
        """Link the run that resumed this one after its worker stopped (the same
        collection and creator, so whoever sees this run sees it)."""
        links = format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            (
                (reverse("admin:retrieval_indexrun_change", args=[resume.pk]), resume)
                for resume in run.resumes.order_by("pk")
            ),
        )
        return links or "—"

    @admin.display(description="errors")
    def error_table(self, run: IndexRun) -> str:
        if not run.errors:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td></tr>",
            ((e.get("document", ""), e.get("error", "")) for e in run.errors),
        )
        return format_html("<table><tr><th>document</th><th>error</th></tr>{}</table>", rows)


def progress_text(data: dict[str, Any]) -> str:
    """Return ``"3 / 10 documents, 42 chunks"`` (a graph run's: chunks and triples); the
    script writes the same text."""
    read, written = data["units"]
    return f"{data['done']} / {data['total']} {read}, {data['chunks']} {written}"
