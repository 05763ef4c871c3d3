"""Extracting an uploaded zip within bounds, so that a small archive cannot fill the disk.

The member count, the bytes extracted and each member's compression ratio are
checked against ``MAX_ARCHIVE_MEMBERS``, ``MAX_ARCHIVE_BYTES`` and
``MAX_ARCHIVE_RATIO``: first as the archive's directory declares them, then while
members are read in bounded pieces, since a directory can lie.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from retrieval.conf import retrieval_settings
from retrieval.exceptions import RetrievalError

#: Bytes read from a member at a time.
PIECE_BYTES = 64 * 1024
#: A member's ratio is judged past this many bytes: small files of repeated lines
#: compress very well and cost nothing.
RATIO_GRACE_BYTES = 1024 * 1024


class ArchiveError(RetrievalError):
    """An archive is over a limit, unsafe or unreadable; the message names what to fix."""


def extract(upload: IO[bytes] | Path, target: Path, *, wanted: Callable[[str], bool]) -> list[Path]:
    """Extract the members of zip ``upload`` whose names ``wanted`` accepts into ``target``.

    Return their paths. Raise :class:`ArchiveError` naming the limit passed, or the
    member that cannot be read; ``zipfile.BadZipFile`` for what is not a zip. What was
    written before a failure stays in ``target``: extract into a temporary directory.
    """
    with zipfile.ZipFile(upload) as archive:
        _check_member_count(archive)
        chosen = [m for m in archive.infolist() if not _is_dir(m) and wanted(m.filename)]
        budget = _Budget()
        budget.check_declared(chosen)
        paths = []
        for member in chosen:
            destination = _inside(target, member.filename)
            destination.parent.mkdir(parents=True, exist_ok=True)
            size = 0
            with _opened(archive, member) as source, destination.open("wb") as out:
                while piece := _read(source, member):
                    size += len(piece)
                    budget.add(member, len(piece), size)
                    out.write(piece)
            paths.append(destination)
    return paths


def check_declared(archive: zipfile.ZipFile) -> None:
    """Raise :class:`ArchiveError` if ``archive`` as its directory declares it is over a limit,
    or holds a member ``zipfile`` would read unbounded (bzip2, LZMA) or cannot read (encrypted).

    For a reader that goes through ``zipfile`` (openpyxl does), the declared sizes are the
    bound: ``zipfile`` stops reading a member at its declared size, whatever the data holds.
    """
    _check_member_count(archive)
    members = [member for member in archive.infolist() if not _is_dir(member)]
    _Budget().check_declared(members)
    for member in members:
        _check_method(member)


def _check_member_count(archive: zipfile.ZipFile) -> None:
    max_members = int(retrieval_settings.MAX_ARCHIVE_MEMBERS)
    members = archive.infolist()
    if len(members) > max_members:
        raise ArchiveError(
            f"The archive has {len(members)} members; the limit is {max_members} "
            "(MAX_ARCHIVE_MEMBERS)."
        )


def _is_dir(member: zipfile.ZipInfo) -> bool:
    # ZipInfo.is_dir() raises IndexError on a member whose name is empty.
    return member.filename.endswith("/")


class _Budget:
    """The bytes extracted so far, against the archive limits."""

    def __init__(self) -> None:
        self.max_bytes = int(retrieval_settings.MAX_ARCHIVE_BYTES)
        self.max_ratio = float(retrieval_settings.MAX_ARCHIVE_RATIO)
        self.total = 0

    def check_declared(self, members: list[zipfile.ZipInfo]) -> None:
        declared = sum(member.file_size for member in members)
        if declared > self.max_bytes:
            raise self._too_large(declared)
        for member in members:
            self._check_ratio(member, member.file_size)

    def add(self, member: zipfile.ZipInfo, count: int, member_size: int) -> None:
        """Count ``count`` more bytes read, ``member_size`` of them from ``member`` so far."""
        self.total += count
        if self.total > self.max_bytes:
            raise self._too_large(self.total)
        self._check_ratio(member, member_size)

    def _check_ratio(self, member: zipfile.ZipInfo, size: int) -> None:
        if size > RATIO_GRACE_BYTES and size > self.max_ratio * max(member.compress_size, 1):
            ratio = size / max(member.compress_size, 1)
            raise ArchiveError(
                f"{member.filename} expands {ratio:.0f} times ({member.compress_size} bytes to "
                f"{size} or more); the limit is {self.max_ratio:g} (MAX_ARCHIVE_RATIO)."
            )

    def _too_large(self, size: int) -> ArchiveError:
        return ArchiveError(
            f"The archive expands to {size} bytes or more; the limit is {self.max_bytes} "
            "(MAX_ARCHIVE_BYTES)."
        )


def _inside(target: Path, name: str) -> Path:
    destination = (target / name).resolve()
    if not destination.is_relative_to(target.resolve()):
        raise ArchiveError(f"The archive holds a path outside its folder: {name}")
    return destination


def _opened(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> Any:
    _check_method(member)
    return archive.open(member)


def _check_method(member: zipfile.ZipInfo) -> None:
    if member.flag_bits & 0x1:
        raise ArchiveError(f"{member.filename} is encrypted; upload an archive without a password.")
    # zipfile reads bzip2 and LZMA members without bounding what one read expands to.
    if member.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise ArchiveError(
            f"{member.filename} is compressed with method {member.compress_type}; "
            "zip it again with the usual one (deflate)."
        )


def _read(source: IO[bytes], member: zipfile.ZipInfo) -> bytes:
    try:
        return source.read(PIECE_BYTES)
    except (zlib.error, EOFError) as e:  # corrupt compressed data, a truncated member
        raise ArchiveError(f"{member.filename} cannot be read: {e}.") from e
