"""Fetch the JavaScript libraries the admin pages draw with into the app's static files.

A development tool, not part of the package: the repository holds only code this project
wrote, so third-party files are downloaded from the npm registry into a checkout, as
pinned tarballs whose ``dist.integrity`` (SHA-512, from ``npm view NAME@VERSION
dist.integrity``) is checked before anything is extracted; a wheel built afterwards
ships them with the app's other static files::

    python3 tools/static_vendor.py          # idempotent: skips files already present

``dev.py`` runs it before the tests and the demo.
"""

from __future__ import annotations

import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR_DIR = ROOT / "retrieval" / "static" / "retrieval" / "vendor"
REGISTRY = "https://registry.npmjs.org"


@dataclass(frozen=True)
class Package:
    """A pinned npm package and the files taken from its tarball (path -> name in vendor/)."""

    name: str
    version: str
    integrity: str
    files: dict[str, str]

    @property
    def tarball_url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.name}-{self.version}.tgz"


PACKAGES = (
    Package(
        name="cytoscape",
        version="3.34.4",
        integrity="sha512-msY99tMY8iWTg+sIPGfSqDcPNOt4xcj+v/K/7qUFaCUxxlqnMkUYLBjRUzn9W5CU/R2hrmtJa5+UtovrEM2ctg==",
        files={
            "package/dist/cytoscape.min.js": "cytoscape.min.js",
            "package/LICENSE": "cytoscape.LICENSE.txt",
        },
    ),
)


def verify(data: bytes, integrity: str) -> None:
    """Raise ``ValueError`` unless ``data`` matches an npm ``sha512-…`` integrity string."""
    algorithm, _, expected = integrity.partition("-")
    if algorithm != "sha512":
        raise ValueError(f"Unsupported integrity algorithm {algorithm!r}.")
    actual = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if actual != expected:
        raise ValueError(f"Integrity check failed: expected {integrity}, got sha512-{actual}.")


def install(package: Package, directory: Path = VENDOR_DIR, *, timeout: float = 60) -> list[Path]:
    """Download, verify and extract one package's files; return their paths."""
    targets = {source: directory / name for source, name in package.files.items()}
    if all(path.exists() for path in targets.values()):
        return list(targets.values())
    with urllib.request.urlopen(package.tarball_url, timeout=timeout) as response:
        data = response.read()
    verify(data, package.integrity)
    directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for source, target in targets.items():
            member = archive.extractfile(source)
            if member is None:
                raise ValueError(f"{package.name}@{package.version} has no file {source}.")
            partial = target.with_suffix(target.suffix + ".part")
            partial.write_bytes(member.read())
            partial.replace(target)  # never leave half a file where the page looks
    return list(targets.values())


def ensure_all(directory: Path = VENDOR_DIR) -> list[Path]:
    """Install every pinned package that is missing."""
    return [path for package in PACKAGES for path in install(package, directory)]


def main() -> int:
    try:
        for path in ensure_all():
            print(f"vendored {path.relative_to(VENDOR_DIR.parent.parent.parent)}")
    except (OSError, ValueError) as e:
        print(f"Could not vendor the static libraries: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
