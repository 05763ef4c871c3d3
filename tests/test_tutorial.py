"""The tutorial, followed as written in a fresh virtualenv (issue 65).

``docs/tutorial.md`` marks each of its blocks on the line before it:

- ``<!-- tutorial: run -->``: shell lines, run in order in one bash session (so ``cd`` and
  ``source .venv/bin/activate`` carry on), from an empty folder;
- ``<!-- tutorial: append FILE -->`` / ``<!-- tutorial: write FILE -->``: the block's text
  added to, or written as, FILE (relative to the folder the steps are in at that point);
- ``<!-- tutorial: serve -->``: one line that serves until stopped (``runserver``): started in
  the background on a free port, which replaces ``127.0.0.1:8000`` in the lines after it,
  waited for, and stopped when the steps end;
- ``<!-- tutorial: not run, REASON -->``: shown only.

Only the checkout's path is substituted (``/path/to/django-retrieval``: a copy of this
working tree's files, as a fresh clone has them), and the database is the test suite's own
server, with a new database named by the libpq variables (``PGHOST``, ``PGUSER``,
``PGDATABASE``) the tutorial reads. Dependencies come from the pip cache or the configured
indexes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from tests.support.processes import ROOT
from tests.test_docs import code_blocks

pytestmark = pytest.mark.slow

TUTORIAL = ROOT / "docs" / "tutorial.md"
CHECKOUT = "/path/to/django-retrieval"
#: Where the tutorial's server listens; the test's listens on a free port.
SERVED = "127.0.0.1:8000"
MARKER = re.compile(
    r"<!-- tutorial: (?P<action>run|serve|append|write|not run)[ ,]*(?P<arg>[^>]*?) -->"
)
#: Printed before each step, so the output says which step failed and what each printed.
STEP = "@@tutorial-step@@"
#: Ends the here-document that writes a file's block.
END = "TUTORIAL_EOF"


@dataclass
class Step:
    where: str  # docs/tutorial.md:LINE
    action: str
    arg: str  # the file to write, or the reason a block is not run
    body: str

    def script(self, checkout: Path, port: int) -> str:
        """The bash lines that take this step, each announced first."""
        if self.action in ("run", "serve"):
            lines = [
                line
                for line in self.body.replace("\\\n", " ").splitlines()
                if line.strip() and not line.lstrip().startswith("#")
            ]
            if self.action == "serve":
                assert len(lines) == 1, f"{self.where}: serve one command"
                lines = [
                    f"{lines[0]} 127.0.0.1:{port} --noreload > serve.log 2>&1 &",
                    "trap 'kill $! 2>/dev/null' EXIT",
                    f"curl -s -o /dev/null --retry 50 --retry-connrefused --retry-delay 1 "
                    f"http://127.0.0.1:{port}/admin/login/ || (cat serve.log; exit 1)",
                ]
            script = "".join(f"{announce(f'{self.where}: {line}')}{line}\n" for line in lines)
            return script.replace(CHECKOUT, str(checkout)).replace(SERVED, f"127.0.0.1:{port}")
        redirect = ">>" if self.action == "append" else ">"
        folder = os.path.dirname(self.arg)
        return (
            announce(f"{self.where}: {self.action} {self.arg}")
            + (f"mkdir -p {shlex.quote(folder)}\n" if folder else "")
            + f"cat {redirect} {shlex.quote(self.arg)} <<'{END}'\n\n{self.body}\n{END}\n"
        )


def announce(step: str) -> str:
    """A line of bash printing ``step`` on a line of its own (curl ends without a newline)."""
    return f"printf '\\n%s\\n' {shlex.quote(f'{STEP} {step}')}\n"


def tutorial_steps() -> list[Step]:
    """Every block of the tutorial as a step; a block without a marker is an error."""
    text = TUTORIAL.read_text()
    steps = []
    for block in code_blocks(TUTORIAL):
        before = text.splitlines()[block.line - 2] if block.line > 1 else ""
        marker = MARKER.search(before)
        assert marker, f"{block.id}: mark the block with <!-- tutorial: ... --> (see this test)"
        steps.append(Step(block.id, marker["action"], marker["arg"].strip(), block.body))
    return steps


def test_every_block_is_a_step_and_the_tutorial_names_the_newcomer_path():
    steps = tutorial_steps()
    run = "\n".join(step.body for step in steps if step.action == "run")
    for command in (
        f'pip install "{CHECKOUT}[local]"',
        "django-admin startproject mysite",
        "python manage.py check",
        "python manage.py migrate",
        "python manage.py retrieval_ingest",
        "python manage.py retrieval_search",
    ):
        assert command in run, f"the tutorial no longer runs {command!r}"
    written = {step.arg for step in steps if step.action in ("append", "write")}
    assert {"mysite/settings.py", "mysite/urls.py"} <= written
    assert all(step.arg for step in steps if step.action == "not run"), "say why it is not run"


def copy_of_the_checkout(destination: Path) -> Path:
    """Copy the files a clone of this working tree has (tracked, and new ones not ignored).

    pip builds a folder in place (``build/``, ``*.egg-info``): in a copy, as in a
    newcomer's fresh clone, never in the checkout that tests/test_packaging.py builds from."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not there
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def printed_json(output: str) -> dict:
    """The JSON object a step printed (after any lines of its own)."""
    return json.JSONDecoder().raw_decode(output, output.index("{"))[0]


def step_outputs(output: str) -> dict[str, str]:
    """What each step printed, by its announcement (``docs/tutorial.md:LINE: command``)."""
    outputs: dict[str, str] = {}
    current = ""
    for line in output.splitlines():
        if line.startswith(STEP):
            current = line.removeprefix(STEP).strip()
            outputs[current] = ""
        else:
            outputs[current] = outputs.get(current, "") + line + "\n"
    return outputs


@pytest.mark.django_db
def test_the_tutorial_as_written_gives_a_site_that_ingests_and_finds_a_file(tmp_path, new_database):
    steps = [step for step in tutorial_steps() if step.action != "not run"]
    checkout = copy_of_the_checkout(tmp_path / "django-retrieval")
    port = free_port()
    script = "set -eo pipefail\n" + "".join(step.script(checkout, port) for step in steps)
    # `python3` is this interpreter, as the tutorial's reader has one; libpq's variables name
    # the suite's server and the new database; nothing of the suite's own settings leaks in.
    interpreter = tmp_path / "bin"
    interpreter.mkdir()
    (interpreter / "python3").symlink_to(sys.executable)
    settings = connection.settings_dict
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DJANGO_SETTINGS_MODULE", "PYTHONPATH", "VIRTUAL_ENV", "DATABASE_URL")
        and not key.startswith("PG")
    }
    environment.update(
        PATH=f"{interpreter}:{os.environ['PATH']}",
        PGHOST=settings["HOST"],
        PGUSER=settings["USER"],
        PGDATABASE=new_database,
        **({"PGPORT": str(settings["PORT"])} if settings["PORT"] else {}),
        **({"PGPASSWORD": settings["PASSWORD"]} if settings["PASSWORD"] else {}),
    )
    folder = tmp_path / "newcomer"
    folder.mkdir()
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=folder,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    outputs, status = step_outputs(done.stdout), done.returncode
    last = list(outputs)[-1]
    assert status == 0, f"the tutorial's step {last} failed:\n{outputs[last][-5000:]}"

    def output_of(command: str) -> str:
        [where] = [key for key in outputs if command in key]
        return outputs[where]

    assert "System check identified no issues" in output_of("manage.py check")
    assert "Applying retrieval." in output_of("manage.py migrate")
    assert "indexed" in output_of("manage.py retrieval_ingest")
    found = output_of("manage.py retrieval_search")
    assert "handbook/reset-password.md" in found, f"the search did not find the file:\n{found}"
    uploaded = printed_json(output_of("-F file=@"))
    assert (uploaded["external_id"], uploaded["status"]) == ("vpn.md", "indexed"), uploaded
    answered = printed_json(output_of("/api/search/"))
    assert answered["results"][0]["document"] == "vpn.md", answered
    installed = (folder / ".venv" / "lib").glob("python3*/site-packages/retrieval/__init__.py")
    assert next(installed, None), "the app is not installed in the tutorial's virtualenv"
