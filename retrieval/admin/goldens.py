"""Golden sets: their queries and judgments, BEIR import and export, evaluation, judging.

Results are judged from the playground and from a trace's page through
:meth:`EvalSetAdmin.judge_view`; votes from the feedback endpoint wait in the
judgment list as candidates until accepted.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme

from retrieval.conf import retrieval_settings
from retrieval.exceptions import AccessDenied, RetrievalError
from retrieval.models import Chunk, Collection, EvalQuery, EvalSet, Judgment
from retrieval.services.quality import goldens
from retrieval.services.quality.eval_runs import create_eval_run
from retrieval.services.quality.evaluation import DatasetError
from retrieval.validation import archives

from .base import COLLECTION_FILTER, EDIT_GOLDEN, QualityScopedAdminMixin, scope_of
from .charts import history_svg

MEDIA = {"css": {"all": ["retrieval/admin/admin.css", "retrieval/admin/quality.css"]}}


class EvaluateForm(forms.Form):
    pipeline = forms.ChoiceField(help_text="The pipeline to run over each set's queries.")
    top_k = forms.IntegerField(min_value=1, max_value=1000, initial=100, label="Top k")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["pipeline"].choices = [(p, p) for p in sorted(retrieval_settings.PIPELINES)]


@admin.action(description="Evaluate selected sets with a pipeline…", permissions=["change"])
def evaluate_sets(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """Ask for a pipeline, then queue one evaluation run per set."""
    modeladmin.authorize_rows(request, queryset, "change")
    form = EvaluateForm(request.POST if "apply" in request.POST else None)
    if form.is_bound and form.is_valid():
        for eval_set in queryset.select_related("collection"):
            try:
                run = create_eval_run(
                    eval_set,
                    form.cleaned_data["pipeline"],
                    top_k=form.cleaned_data["top_k"],
                    created_by=request.user,
                )
            except RetrievalError as e:
                modeladmin.message_user(request, f"{eval_set}: {e}", messages.ERROR)
                continue
            level = messages.ERROR if run.status == run.Status.FAILED else messages.SUCCESS
            modeladmin.message_user(
                request, f"{eval_set}: evaluation run #{run.pk} {run.status}. {run.message}", level
            )
        return HttpResponseRedirect(reverse("admin:retrieval_evalrun_changelist"))
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Evaluate golden sets",
        "opts": modeladmin.model._meta,
        "sets": list(queryset),
        "form": form,
        "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "retrieval/admin/quality/evaluate.html", context)


@admin.action(description="Export selected sets (BEIR layout, zip)")
def export_sets(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> Any:
    """Download one zip holding a BEIR folder per set."""
    buffer = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(buffer, "w") as archive:
        for eval_set in queryset:
            folder = goldens.export_beir(eval_set, Path(tmp) / eval_set.name)
            for file in sorted(folder.rglob("*")):
                if file.is_file():
                    archive.write(file, file.relative_to(tmp).as_posix())
    response = HttpResponse(buffer.getvalue(), content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="golden-sets-beir.zip"'
    return response


class ImportForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="The golden set to create or extend.")
    collection = forms.ModelChoiceField(queryset=Collection.objects.all())
    level = forms.ChoiceField(choices=EvalSet.Level.choices)
    archive = forms.FileField(
        help_text="A zip of queries.jsonl and qrels/<split>.tsv; a query may carry an optional "
        '"answer" (its reference answer) and "answerable": false.'
    )
    split = forms.CharField(initial="test", max_length=50)


class AddQueryForm(forms.Form):
    eval_set = forms.ModelChoiceField(
        queryset=EvalSet.objects.none(), label="Golden set", empty_label=None
    )
    query = forms.CharField(max_length=10_000, strip=True)


class JudgmentInline(admin.TabularInline):
    model = Judgment
    fields = ["target", "grade", "status", "source"]
    readonly_fields = ["source"]
    extra = 0


@admin.register(EvalSet)
class EvalSetAdmin(QualityScopedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "collection", "level", "query_count", "created_at"]
    list_filter = [COLLECTION_FILTER, "level"]
    search_fields = ["name"]
    actions = [evaluate_sets, export_sets]
    readonly_fields = ["history", "created_at"]
    change_list_template = "retrieval/admin/evalset/change_list.html"
    Media = type("Media", (), MEDIA)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(query_total=Count("queries"))

    @admin.display(description="queries", ordering="query_total")
    def query_count(self, eval_set: EvalSet) -> int:
        return eval_set.query_total

    @admin.display(description="metric history (finished runs, oldest first)")
    def history(self, eval_set: EvalSet) -> str:
        return history_svg(list(eval_set.runs.order_by("created_at")[:100]))

    def get_urls(self) -> list:
        view = self.admin_site.admin_view
        return [
            path("judge/", view(self.judge_view), name="retrieval_judge"),
            path("import/", view(self.import_view), name="retrieval_evalset_import"),
            path("add-query/", view(self.add_query_view), name="retrieval_evalset_add_query"),
            *super().get_urls(),
        ]

    def judge_view(self, request: HttpRequest) -> HttpResponse:
        """Record a judgment posted from the playground or a trace's page, then go back."""
        if request.method != "POST":
            return HttpResponse("POST a judgment.", status=405)
        if not self.has_change_permission(request):
            raise PermissionDenied
        back = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = reverse("admin:retrieval_evalset_changelist")
        try:
            # Only a set and a chunk the user may see; hidden ones read as missing.
            eval_set = self.get_queryset(request).get(pk=int(request.POST.get("eval_set", "")))
            if not self.has_change_permission(request, eval_set):
                raise PermissionDenied
            chunks = scope_of(request).restrict(Chunk.objects.all(), document="document")
            chunk = chunks.select_related("document").get(pk=int(request.POST.get("chunk", "")))
            grade = int(request.POST.get("grade", ""))
            judgment = goldens.judge(
                eval_set,
                request.POST.get("query", ""),
                chunk,
                grade=grade,
                source="admin",
                user=request.user,
            )
        except (ValueError, EvalSet.DoesNotExist, Chunk.DoesNotExist):
            messages.error(request, "Judge a result with an existing set, chunk and grade.")
        except RetrievalError as e:
            messages.error(request, str(e))
        else:
            verdict = "relevant" if judgment.grade else "not relevant"
            messages.success(
                request, f"{eval_set}: {judgment.target} is {verdict} for {judgment.query.text!r}."
            )
        return HttpResponseRedirect(back)

    def add_query_view(self, request: HttpRequest) -> HttpResponse:
        """Add a query (from search analytics) to a golden set, then judge it in the playground."""
        scope = scope_of(request)
        writable = scope.writable_collections(*EDIT_GOLDEN)
        if not scope.sees_quality or not writable.exists():
            raise PermissionDenied
        sets = EvalSet.objects.filter(collection__in=writable).select_related("collection")
        collection = writable.filter(pk=_int(request.GET.get("collection"))).first()
        if collection is not None:  # from a collection's analytics: its own sets
            sets = sets.filter(collection=collection)
        form = AddQueryForm(
            request.POST if request.method == "POST" else None,
            initial={"query": request.GET.get("query", "")},
        )
        form.fields["eval_set"].queryset = sets
        if request.method == "POST" and form.is_valid():
            eval_set, text = form.cleaned_data["eval_set"], form.cleaned_data["query"]
            try:
                scope.authorize(*EDIT_GOLDEN, eval_set.collection)
                with transaction.atomic():
                    known = eval_set.queries.filter(text=text).first()
                    eval_query = known or goldens.query_for(eval_set, text)
            except AccessDenied as e:
                raise PermissionDenied from e
            except RetrievalError as e:
                form.add_error("query", str(e))
            else:
                verdict = "is already" if known else "added"
                messages.success(
                    request,
                    f"{eval_set}: {eval_query.query_id} {text!r} {verdict} in the set; judge its "
                    "results below.",
                )
                params = {"collection": eval_set.collection_id, "query": text}
                return HttpResponseRedirect(
                    f"{reverse('admin:retrieval_playground')}?{urlencode(params)}"
                )
        context = {
            **self.admin_site.each_context(request),
            "title": "Add a query to a golden set",
            "opts": self.opts,
            "form": form,
            "collection": collection,
            "add_set_url": reverse("admin:retrieval_evalset_add")
            if self.has_add_permission(request)
            else "",
        }
        return TemplateResponse(request, "retrieval/admin/quality/add_query.html", context)

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Create or extend a set from an uploaded BEIR zip (queries and qrels)."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = ImportForm(request.POST or None, request.FILES or None)
        form.fields["collection"].queryset = scope_of(request).writable_collections("add", EvalSet)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    folder = _unpack(data["archive"], Path(tmp))
                    eval_set = goldens.import_beir(
                        data["name"],
                        data["collection"],
                        folder,
                        split=data["split"],
                        level=data["level"],
                    )
                except (RetrievalError, zipfile.BadZipFile) as e:
                    form.add_error("archive", str(e).replace(f"{tmp}/", ""))
                    eval_set = None
                except UnicodeDecodeError as e:
                    form.add_error("archive", f"queries.jsonl and qrels must be UTF-8 text ({e}).")
                    eval_set = None
            if eval_set is not None:
                count = eval_set.queries.count()
                messages.success(request, f"{eval_set}: {count} queries.")
                return HttpResponseRedirect(
                    reverse("admin:retrieval_evalset_change", args=[eval_set.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "title": "Import a golden set (BEIR layout)",
            "opts": self.opts,
            "form": form,
        }
        return TemplateResponse(request, "retrieval/admin/quality/import.html", context)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _unpack(upload: Any, target: Path) -> Path:
    """Extract a BEIR zip's queries and qrels within the archive limits; return their folder.

    The corpus is not imported, so ``corpus.jsonl`` (and anything else) is never extracted.
    """
    limit = int(retrieval_settings.MAX_UPLOAD_BYTES)
    if upload.size > limit:
        raise DatasetError(
            f"The archive is {upload.size} bytes; the limit is {limit} (MAX_UPLOAD_BYTES)."
        )
    archives.extract(upload, target, wanted=_beir_member)
    found = sorted(target.rglob("queries.jsonl"))
    if not found:
        raise DatasetError("The archive has no queries.jsonl.")
    folder = found[0].parent
    (folder / "corpus.jsonl").write_text("")  # load_beir wants one; it is not read
    return folder


def _beir_member(name: str) -> bool:
    """Return whether a member is what an import reads: queries, or a split's qrels."""
    path = PurePosixPath(name)
    return path.name == "queries.jsonl" or (path.parent.name == "qrels" and path.suffix == ".tsv")


@admin.register(EvalQuery)
class EvalQueryAdmin(QualityScopedAdminMixin, admin.ModelAdmin):
    collection_path = "eval_set__collection"
    list_display = ["query_id", "text", "eval_set", "answerable", "has_reference_answer"]
    list_filter = [("eval_set", admin.RelatedOnlyFieldListFilter), "answerable"]
    search_fields = ["text", "query_id", "reference_answer"]
    fields = ["eval_set", "query_id", "text", "reference_answer", "answerable"]
    inlines = [JudgmentInline]

    @admin.display(description="reference answer", boolean=True)
    def has_reference_answer(self, query: EvalQuery) -> bool:
        return bool(query.reference_answer)


@admin.action(description="Accept selected judgments", permissions=["change"])
def accept(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    modeladmin.authorize_rows(request, queryset, "change")
    count = queryset.update(status=Judgment.Status.ACCEPTED)
    modeladmin.message_user(request, f"{count} judgment(s) accepted.")


@admin.action(description="Reject selected judgments", permissions=["change"])
def reject(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    modeladmin.authorize_rows(request, queryset, "change")
    count = queryset.update(status=Judgment.Status.REJECTED)
    modeladmin.message_user(request, f"{count} judgment(s) rejected.")


@admin.register(Judgment)
class JudgmentAdmin(QualityScopedAdminMixin, admin.ModelAdmin):
    collection_path = "query__eval_set__collection"
    list_display = ["target", "grade", "status", "source", "query", "created_at"]
    list_filter = ["status", "source", ("query__eval_set", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["target", "query__text"]
    list_select_related = ["query"]
    actions = [accept, reject]
