"""Evaluation runs: progress, metrics, per-query results, and two runs compared query by query."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from retrieval.exceptions import RetrievalError
from retrieval.models import EvalRun
from retrieval.services.quality.eval_runs import compare
from retrieval.services.quality.evaluation import METRICS

from .base import QualityScopedAdminMixin, ReadOnlyAdmin, status_badge
from .goldens import MEDIA

#: How often the runs list reloads while a run is active.
REFRESH_SECONDS = 3


@admin.action(description="Compare two selected runs query by query")
def compare_runs(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> Any:
    runs = list(queryset.order_by("created_at").values_list("pk", flat=True))
    if len(runs) != 2:
        modeladmin.message_user(request, "Select exactly two runs to compare.", messages.ERROR)
        return None
    url = reverse("admin:retrieval_evalrun_compare")
    return HttpResponseRedirect(f"{url}?first={runs[0]}&second={runs[1]}")


@admin.register(EvalRun)
class EvalRunAdmin(QualityScopedAdminMixin, ReadOnlyAdmin):
    list_display = [
        "pk",
        "eval_set",
        "pipeline",
        "status_label",
        "progress",
        "ndcg",
        "recall",
        "mrr",
        "map",
        "latency",
        "created_at",
    ]
    collection_path = "eval_set__collection"
    list_filter = ["status", ("eval_set", admin.RelatedOnlyFieldListFilter), "pipeline"]
    list_select_related = ["eval_set"]
    actions = [compare_runs]
    fields = ["eval_set", "pipeline", "top_k", "status", "message", "metric_table", "query_table"]
    readonly_fields = ["metric_table", "query_table"]
    change_list_template = "retrieval/admin/evalrun/change_list.html"
    Media = type("Media", (), MEDIA)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        """Reload the list every few seconds while a run is queued or running."""
        active = (
            self.get_queryset(request)
            .filter(status__in=[EvalRun.Status.QUEUED, EvalRun.Status.RUNNING])
            .exists()
        )
        context = {**(extra_context or {}), "refresh_seconds": REFRESH_SECONDS if active else 0}
        return super().changelist_view(request, context)

    def get_urls(self) -> list:
        compare_url = path(
            "compare/",
            self.admin_site.admin_view(self.compare_view),
            name="retrieval_evalrun_compare",
        )
        return [compare_url, *super().get_urls()]

    @admin.display(description="status", ordering="status")
    def status_label(self, run: EvalRun) -> str:
        return status_badge(run.status, run.get_status_display(), title=run.message)

    @admin.display(description="progress")
    def progress(self, run: EvalRun) -> str:
        return format_html(
            '<progress max="{}" value="{}"></progress> {} / {}',
            max(run.queries_total, 1),
            run.queries_done,
            run.queries_done,
            run.queries_total,
        )

    def _metric(self, run: EvalRun, name: str) -> str:
        value = run.metrics.get(name)
        return "" if value is None else f"{value:.4f}"

    @admin.display(description="nDCG@10")
    def ndcg(self, run: EvalRun) -> str:
        return self._metric(run, "ndcg@10")

    @admin.display(description="Recall@100")
    def recall(self, run: EvalRun) -> str:
        return self._metric(run, "recall@100")

    @admin.display(description="MRR@10")
    def mrr(self, run: EvalRun) -> str:
        return self._metric(run, "mrr@10")

    @admin.display(description="MAP@100")
    def map(self, run: EvalRun) -> str:
        return self._metric(run, "map@100")

    @admin.display(description="latency p50 / p95")
    def latency(self, run: EvalRun) -> str:
        if "latency_ms_p50" not in run.metrics:
            return ""
        return f"{run.metrics['latency_ms_p50']:.1f} / {run.metrics['latency_ms_p95']:.1f} ms"

    @admin.display(description="metrics")
    def metric_table(self, run: EvalRun) -> str:
        rows = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", sorted(run.metrics.items()))
        return format_html('<table class="retrieval-metrics">{}</table>', rows) if rows else "—"

    @admin.display(description="queries")
    def query_table(self, run: EvalRun) -> str:
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td>" + "<td>{}</td>" * len(METRICS) + "<td>{}</td></tr>",
            (
                (
                    query_id,
                    item["text"],
                    *(f"{item['metrics'][name]:.4f}" for name in METRICS),
                    ", ".join(item["ranking"]),
                )
                for query_id, item in run.per_query.items()
            ),
        )
        head = format_html_join("", "<th>{}</th>", ((name,) for name in METRICS))
        return format_html(
            '<table class="retrieval-queries"><tr><th>id</th><th>query</th>{}'
            "<th>top ranked</th></tr>{}</table>",
            head,
            rows,
        )

    def compare_view(self, request: HttpRequest) -> HttpResponse:
        """Show two runs of one set side by side: per-query metric, delta, win/loss/tie."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        back = HttpResponseRedirect(reverse("admin:retrieval_evalrun_changelist"))
        try:
            runs = self.get_queryset(request).select_related("eval_set")  # hidden: missing
            first = runs.get(pk=int(request.GET["first"]))
            second = runs.get(pk=int(request.GET["second"]))
            if first.eval_set_id != second.eval_set_id:
                raise RetrievalError(
                    f"Runs #{first.pk} and #{second.pk} evaluate different sets "
                    f"({first.eval_set}, {second.eval_set}); compare runs of one set."
                )
            metric = request.GET.get("metric", "ndcg@10")
            comparison = compare(first, second, metric=metric)
        except (KeyError, ValueError, EvalRun.DoesNotExist):
            messages.error(request, "Choose two existing runs to compare.")
            return back
        except RetrievalError as e:
            messages.error(request, str(e))
            return back
        context = {
            **self.admin_site.each_context(request),
            "title": f"Run #{first.pk} ({first.pipeline}) vs #{second.pk} ({second.pipeline})",
            "opts": self.opts,
            "first": first,
            "second": second,
            "comparison": comparison,
            "metrics": list(METRICS),
            "media": self.media,
        }
        return TemplateResponse(request, "retrieval/admin/quality/compare.html", context)
