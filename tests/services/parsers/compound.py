"""A writer of OLE2 compound files ([MS-CFB] version 3), for the tests' Outlook messages.

No maintained Python library writes them (olefile reads, and rewrites streams in place);
this one lays out a tree of storages and streams as the format describes: a header, the
FAT, the directory (each storage's children chained as a binary search tree in the
format's name order), the mini FAT and mini stream for streams under 4096 bytes, then the
larger streams, each in consecutive sectors.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

SECTOR = 512
MINI_SECTOR = 64
MINI_CUTOFF = 4096
FREE, END, FAT_SECTOR, NONE = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFF
STORAGE, STREAM, ROOT = 1, 2, 5

#: A tree: a name maps to a stream's bytes or to a storage's own tree.
Tree = dict[str, "bytes | Tree"]


@dataclass
class _Entry:
    name: str
    kind: int
    data: bytes = b""
    children: list[int] = field(default_factory=list)
    start: int = END
    right: int = NONE
    child: int = NONE


def compound_file(tree: Tree) -> bytes:
    """Return the bytes of a compound file holding ``tree`` under its root storage."""
    entries = [_Entry("Root Entry", ROOT)]
    _add(entries, 0, tree)
    mini = bytearray()
    mini_fat: list[int] = []
    big = [e for e in entries if e.kind == STREAM and len(e.data) >= MINI_CUTOFF]
    for entry in entries:
        if entry.kind == STREAM and 0 < len(entry.data) < MINI_CUTOFF:
            entry.start = len(mini_fat)
            count = -(-len(entry.data) // MINI_SECTOR)
            mini_fat += [len(mini_fat) + i + 1 for i in range(count - 1)] + [END]
            mini += entry.data.ljust(count * MINI_SECTOR, b"\0")
    directory = -(-len(entries) * 128 // SECTOR)
    counts = [directory, -(-len(mini_fat) * 4 // SECTOR), -(-len(mini) // SECTOR)]
    counts += [-(-len(e.data) // SECTOR) for e in big]
    fat_sectors = 1
    while fat_sectors * 128 < fat_sectors + sum(counts):
        fat_sectors += 1
    fat = [FAT_SECTOR] * fat_sectors
    starts = []
    for count in counts:
        starts.append(len(fat) if count else END)
        fat += [len(fat) + i + 1 for i in range(count - 1)] + [END] * bool(count)
    fat += [FREE] * (-len(fat) % 128)
    for entry, start in zip(big, starts[3:], strict=True):
        entry.start = start
    entries[0].start, entries[0].data = starts[2], bytes(mini)
    body = [
        struct.pack(f"<{len(fat)}I", *fat),
        b"".join(_directory_entry(e) for e in entries).ljust(directory * SECTOR, b"\0"),
        _padded(struct.pack(f"<{len(mini_fat)}I", *mini_fat), fill=b"\xff"),
        _padded(bytes(mini)),
        *(_padded(e.data) for e in big),
    ]
    difat = list(range(fat_sectors)) + [FREE] * (109 - fat_sectors)
    header = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII109I",
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
        b"\0" * 16,
        0x3E,
        3,
        0xFFFE,
        9,
        6,
        b"\0" * 6,
        0,
        fat_sectors,
        starts[0],
        0,
        MINI_CUTOFF,
        starts[1],
        counts[1],
        END,
        0,
        *difat,
    )
    return header + b"".join(body)


def _add(entries: list[_Entry], parent: int, tree: Tree) -> None:
    """Append ``tree``'s entries, each storage's children chained in the format's order."""
    children = []
    for name, value in tree.items():
        index = len(entries)
        if isinstance(value, dict):
            entries.append(_Entry(name, STORAGE))
            _add(entries, index, value)
        else:
            entries.append(_Entry(name, STREAM, value))
        children.append(index)
    children.sort(key=lambda i: (len(entries[i].name), entries[i].name.upper()))
    for left, right in zip(children, children[1:], strict=False):
        entries[left].right = right
    entries[parent].child = children[0] if children else NONE


def _directory_entry(entry: _Entry) -> bytes:
    name = entry.name.encode("utf-16-le") + b"\0\0"
    size = len(entry.data) if entry.kind != STORAGE else 0
    start = entry.start if entry.kind != STORAGE else 0
    return struct.pack(
        "<64sHBBIII16sIQQIQ",
        name,
        len(name),
        entry.kind,
        1,  # black
        NONE,
        entry.right,
        entry.child,
        b"\0" * 16,
        0,
        0,
        0,
        start,
        size,
    )


def _padded(data: bytes, *, fill: bytes = b"\0") -> bytes:
    return data + fill * (-len(data) % SECTOR)
