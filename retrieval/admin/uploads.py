"""The document upload form: many files into one collection, checked before storing."""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath
from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile

from retrieval.conf import retrieval_settings
from retrieval.exceptions import UnsupportedFileType
from retrieval.models import Collection, Document
from retrieval.services.access import Scope
from retrieval.services.ingestion.documents import Upload, store_uploads
from retrieval.services.ingestion.parsing import parser_for_upload


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that takes one or many files and cleans to a list."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[UploadedFile]:
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data] or [single(None, initial)]
        return [single(data, initial)]


class UploadForm(forms.Form):
    """Pick a collection and the files to add to it."""

    collection = forms.ModelChoiceField(queryset=Collection.objects.all())
    files = MultipleFileField(
        help_text="One or many files; a file named like a document of the collection replaces it."
    )

    def __init__(self, *args: Any, scope: Scope, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.scope = scope
        # Only collections the user may add to; another reads as an unknown choice.
        self.fields["collection"].queryset = scope.writable_collections("add", Document)

    def clean_files(self) -> list[UploadedFile]:
        files: list[UploadedFile] = self.cleaned_data["files"]
        limit = int(retrieval_settings.MAX_UPLOAD_BYTES)
        errors, seen = [], set()
        for upload in files:
            if upload.name in seen:
                errors.append(f"{upload.name}: chosen twice.")
            seen.add(upload.name)
            if upload.size > limit:
                errors.append(
                    f"{upload.name}: {upload.size} bytes; the limit is {limit} (MAX_UPLOAD_BYTES)."
                )
                continue
            try:
                parser_for_upload(upload, mime_type=content_type(upload))
            except UnsupportedFileType as e:
                errors.append(str(e))
        if errors:
            raise forms.ValidationError(errors)
        return files

    def save(self) -> list[Document]:
        """Store each file as a pending document of the collection, in one transaction.

        Raises ``AccessDenied`` when the user may not add or replace these documents.
        """
        uploads = [
            Upload(
                external_id=upload.name,
                file=upload,
                name=upload.name,
                mime_type=content_type(upload) or mimetypes.guess_type(upload.name)[0] or "",
                source_path=PurePosixPath(upload.name).name,
            )
            for upload in self.cleaned_data["files"]
        ]
        return store_uploads(self.cleaned_data["collection"], uploads, scope=self.scope)


def content_type(upload: UploadedFile) -> str | None:
    """Return the browser's MIME type, or None when it only said "some bytes"."""
    kind = (upload.content_type or "").split(";")[0].strip()
    return None if kind in ("", "application/octet-stream") else kind
