"""Importing a golden-set zip stays within bounds: zip bombs are form errors (issue 30).

The red team's 1 MB zip expanded to 0.9 GB in the temporary folder; here the limits
are lowered so that small archives built in the test pass them, and nothing of a
refused archive may stay on disk.
"""

from __future__ import annotations

import io
import struct
import tempfile
import zipfile

import pytest
from django.urls import reverse

from retrieval.models import EvalSet

pytestmark = pytest.mark.django_db

QUERIES = '{"_id": "a", "text": "hill"}\n'
QRELS = "query-id\tcorpus-id\tscore\na\thill.txt\t1\n"
MB = 1024 * 1024


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The folder temporary directories are made in, to see what is left there."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def archive(members: dict[str, bytes | str], *, method: int = zipfile.ZIP_DEFLATED) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as zipped:
        for name, data in members.items():
            zipped.writestr(name, data)
    buffer.seek(0)
    buffer.name = "set.zip"
    return buffer


def import_zip(admin_client, atlas, upload: io.BytesIO):
    form = {"name": "imported", "collection": atlas.pk, "level": "documents", "split": "test"}
    return admin_client.post(reverse("admin:retrieval_evalset_import"), {**form, "archive": upload})


def form_error(response) -> str:
    assert response.status_code == 200, response.status_code
    errors = response.context["form"].errors
    assert not EvalSet.objects.filter(name="imported").exists()
    return " ".join(errors["archive"])


def test_a_member_expanding_past_the_byte_limit_is_refused(
    admin_client, atlas, scratch, retrieval_settings
):
    retrieval_settings(MAX_ARCHIVE_BYTES=2 * MB, MAX_ARCHIVE_RATIO=10_000)
    bomb = archive({"set/queries.jsonl": QUERIES, "set/qrels/test.tsv": QRELS + "\n" * (3 * MB)})
    assert len(bomb.getvalue()) < 10_000  # 3 MB of line breaks compress to a few kB
    error = form_error(import_zip(admin_client, atlas, bomb))
    assert "the limit is 2097152 (MAX_ARCHIVE_BYTES)" in error
    assert not any(scratch.iterdir())  # nothing extracted is left behind


def test_a_member_expanding_too_many_times_is_refused(admin_client, atlas, scratch):
    bomb = archive({"set/queries.jsonl": QUERIES, "set/qrels/test.tsv": QRELS + "\n" * (2 * MB)})
    error = form_error(import_zip(admin_client, atlas, bomb))
    assert "set/qrels/test.tsv expands" in error and "the limit is 100 (MAX_ARCHIVE_RATIO)" in error
    assert not any(scratch.iterdir())


def test_a_directory_that_understates_sizes_is_caught_while_reading(
    admin_client, atlas, scratch, retrieval_settings
):
    retrieval_settings(MAX_ARCHIVE_BYTES=2 * MB, MAX_ARCHIVE_RATIO=10_000)
    bomb = archive({"set/queries.jsonl": QUERIES, "set/qrels/test.tsv": QRELS + "\n" * (3 * MB)})
    lying = io.BytesIO(_declare_sizes(bomb.getvalue(), "set/qrels/test.tsv", 100))
    lying.name = "set.zip"
    # zipfile stops at the declared size, so the member fails its checksum.
    assert "Bad CRC-32 for file 'set/qrels/test.tsv'" in form_error(
        import_zip(admin_client, atlas, lying)
    )
    assert not any(scratch.iterdir())


def test_too_many_members_are_refused_before_any_is_read(
    admin_client, atlas, scratch, retrieval_settings
):
    retrieval_settings(MAX_ARCHIVE_MEMBERS=5)
    members = {"set/queries.jsonl": QUERIES, "set/qrels/test.tsv": QRELS}
    many = archive({**members, **{f"set/extra/{i}.txt": "x" for i in range(4)}})
    error = form_error(import_zip(admin_client, atlas, many))
    assert "The archive has 6 members; the limit is 5 (MAX_ARCHIVE_MEMBERS)." in error
    assert not any(scratch.iterdir())
    assert import_zip(admin_client, atlas, archive(members)).status_code == 302  # 2 members


def test_only_queries_and_qrels_are_extracted(admin_client, atlas, scratch, retrieval_settings):
    # An exported set carries its collection's corpus, which an import never reads.
    retrieval_settings(MAX_ARCHIVE_BYTES=MB, MAX_ARCHIVE_RATIO=10_000)
    exported = archive(
        {
            "set/corpus.jsonl": "\n" * (3 * MB),
            "set/queries.jsonl": QUERIES,
            "set/qrels/test.tsv": QRELS,
        }
    )
    assert import_zip(admin_client, atlas, exported).status_code == 302
    assert EvalSet.objects.get(name="imported").queries.count() == 1
    assert not any(scratch.iterdir())


@pytest.mark.parametrize(
    ("members", "method", "error"),
    [
        ({"set/queries.jsonl": "[" * 5000 + "]" * 5000}, zipfile.ZIP_DEFLATED, "nested too deep"),
        ({"set/queries.jsonl": QUERIES}, zipfile.ZIP_BZIP2, "compressed with method 12"),
        ({"set/queries.jsonl": b"\xff\xfe"}, zipfile.ZIP_DEFLATED, "must be UTF-8 text"),
    ],
)
def test_unreadable_members_are_form_errors(admin_client, atlas, scratch, members, method, error):
    members = {"set/qrels/test.tsv": QRELS, **members}
    assert error in form_error(import_zip(admin_client, atlas, archive(members, method=method)))
    assert not any(scratch.iterdir())


def _declare_sizes(data: bytes, name: str, size: int) -> bytes:
    """Return zip ``data`` whose directory says member ``name`` holds ``size`` bytes."""
    out = bytearray(data)
    encoded = name.encode()
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        start = 0
        while (start := out.find(signature, start)) != -1:
            name_at = start + (46 if signature == b"PK\x01\x02" else 30)
            if out[name_at : name_at + len(encoded)] == encoded:
                struct.pack_into("<I", out, start + offset, size)
            start += 4
    return bytes(out)
