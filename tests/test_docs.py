"""The documentation cannot drift from the code.

- The generated references (``docs/_ext/refgen.py``) describe every ``DEFAULTS`` key,
  every component option and every check id, or these tests fail.
- Every ```` ```python ```` block of ``docs/`` and README.md runs: settings snippets in a
  namespace, their ``RETRIEVAL`` then checked by the app's own system checks and
  components built from it; code against the test database. A block that cannot run
  says why in a marker on the line before it (``<!-- example: compile-only, REASON -->``):
  it is compiled and its ``retrieval`` imports resolved, and such blocks stay rare.
- Every shell line naming ``manage.py COMMAND --option`` or ``dev.py COMMAND --option``
  names a command and options that exist (their parsers say).
"""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core import checks
from django.core.management import get_commands, load_command_class
from django.test import override_settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import refgen  # noqa: E402

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
MARKER = re.compile(r"<!-- example: compile-only, (?P<reason>[^>]+?) -->\s*$")
#: Most blocks run; a compile-only one needs a reason, and only these many may exist.
MAX_COMPILE_ONLY = 5
#: Names a settings or urls snippet uses without importing them, as a settings.py has them.
#: The site's own packages examples import from: not importable here.
SITE_MODULES = {"myapp", "mysite"}
SETTINGS_NAMESPACE = {
    "RETRIEVAL": {},
    "INSTALLED_APPS": [],
    "MIDDLEWARE": [],
    "BASE_DIR": Path(),  # startproject's settings.py defines it
}


@dataclass
class Block:
    path: Path
    line: int
    language: str
    body: str
    compile_only: str  # the marker's reason, or ""

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documentation_pages() -> list[Path]:
    pages = [
        path
        for path in sorted((ROOT / "docs").rglob("*.md"))
        if "generated" not in path.parts and "_build" not in path.parts
    ]
    return [*pages, ROOT / "README.md"]


def code_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        language = (match["info"].split() or [""])[0]
        body = "\n".join(line[len(match["indent"]) :] for line in match["body"].splitlines())
        line = text[: match.start()].count("\n") + 1
        blocks.append(Block(path, line, language, body, marker["reason"] if marker else ""))
    return blocks


ALL_BLOCKS = [block for page in documentation_pages() for block in code_blocks(page)]
PYTHON_BLOCKS = [block for block in ALL_BLOCKS if block.language == "python"]


# The generated references ---------------------------------------------------------------


def test_every_default_key_has_a_description():
    undocumented = [setting.key for setting in refgen.settings() if not setting.description]
    assert undocumented == [], "describe these keys in a comment above them in retrieval/conf.py"


def test_a_key_added_without_a_comment_is_undocumented():
    source = """X: dict = {
    # Limits.
    "A": 1,
    "B": 2,  # the second
    "C": {
        "nested": 1,  # not B's
    },
    "D": 3,
    # One.
    "E": 4,
    "F": 5,
}
"""
    assert refgen._key_comments(source, "X") == {
        "A": "Limits.",
        "B": "Limits. the second",
        "C": "",
        "D": "",
        "E": "One.",
        "F": "",
    }


def test_every_component_option_is_documented():
    assert refgen.undocumented_options() == [], (
        "describe these options in their class's docstring (``name``) or in a docs/ page "
        "that names the class"
    )


def test_the_settings_reference_lists_every_key_with_its_default():
    from retrieval.conf import DEFAULTS

    page = refgen.settings_page()
    for key in DEFAULTS:
        assert f"## `{key}`" in page
    assert "Undocumented" not in page
    assert "'SEARCH_DEADLINE': 30.0" in page


def test_the_components_reference_lists_each_option_with_its_default():
    page = refgen.components_page()
    assert "### `BM25Retriever`" in page
    assert "| `k1` | `1.2` |" in page
    assert "| `uri` |" in page  # MilvusIndex


def test_every_check_id_in_the_code_is_in_the_checks_reference():
    ids = refgen.check_ids_in_code()
    summaries = refgen.check_summaries()
    assert {"retrieval.E001", "retrieval.E018", "retrieval.W001"} <= ids
    assert sorted(ids - set(summaries)) == [], (
        "add a line for each to retrieval/checks.py's docstring"
    )
    page = refgen.checks_page()
    for ident in ids:
        assert f"## `{ident}`" in page
    assert "Undocumented" not in page
    # Messages as written, with the hint.
    assert "uses {vendor}; the retrieval app needs PostgreSQL" in page
    assert "Point DATABASES\\[...\\]\\['ENGINE'\\] at" in page


def test_every_retrieval_command_is_in_the_commands_reference():
    page = refgen.commands_page()
    names = refgen.command_names()
    assert "retrieval_search" in names and "retrieval_ingest" in names
    for name in names:
        assert f"## `{name}`" in page
    assert "--json" in page


def test_the_rest_api_reference_lists_every_operation_of_the_schema():
    schema = refgen.openapi_schema()
    page = refgen.rest_api_page()
    for path, operations in schema["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in page
    assert "/api/search/" in schema["paths"]


def test_the_python_api_reference_documents_every_export():
    import retrieval.services as services

    page = refgen.python_api_page()
    for name in services.__all__:
        assert f"retrieval.services.{name}" in page


def test_relative_links_point_at_files_that_exist():
    """Sphinx cannot follow links out of docs/ (bench/README.md ...), so they are checked here."""
    broken = []
    for page in documentation_pages():
        text = FENCE.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.split("#", 1)[0]
            if not path or re.match(r"[a-z]+:", path):
                continue  # an anchor on the page, or a URL
            resolved = (page.parent / path).resolve()
            generated = resolved.parent == refgen.GENERATED and resolved.name in refgen.PAGES
            if not (resolved.exists() or generated):  # generated pages exist once built
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


# Python examples ------------------------------------------------------------------------


def test_examples_are_found_and_compile_only_ones_are_rare():
    assert len(PYTHON_BLOCKS) >= 15
    compile_only = [block.id for block in PYTHON_BLOCKS if block.compile_only]
    assert len(compile_only) <= MAX_COMPILE_ONLY, compile_only


@pytest.mark.parametrize("block", [b for b in PYTHON_BLOCKS if b.compile_only], ids=lambda b: b.id)
def test_a_compile_only_example_compiles_and_its_retrieval_imports_exist(block):
    check_retrieval_imports(compile(block.body, block.id, "exec", ast.PyCF_ONLY_AST))


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize(
    "block", [b for b in PYTHON_BLOCKS if not b.compile_only], ids=lambda b: b.id
)
def test_example_runs(block, django_user_model):
    tree = compile(block.body, block.id, "exec", ast.PyCF_ONLY_AST)
    check_retrieval_imports(tree)
    namespace = example_namespace(django_user_model)
    exec(compile(tree, block.id, "exec"), namespace)  # noqa: S102 (the docs' own code)
    if namespace["RETRIEVAL"]:
        check_settings(namespace["RETRIEVAL"], block)


def example_namespace(user_model) -> dict:
    """What an example may use unnamed: a settings module's names, a request's user."""
    from types import SimpleNamespace

    from django.urls import include, path, re_path

    from retrieval.services import get_or_create_collection

    get_or_create_collection("handbook")  # the collection the examples search
    user = user_model.objects.create_superuser(
        **{user_model.USERNAME_FIELD: "docs-example"}, password="x"
    )
    return {
        "__name__": "docs_example",
        **{key: type(value)() for key, value in SETTINGS_NAMESPACE.items()},
        "path": path,
        "include": include,
        "re_path": re_path,
        "user": user,
        "request": SimpleNamespace(user=user),
    }


def check_retrieval_imports(tree: ast.AST) -> None:
    """Every ``from retrieval... import name`` and ``import retrieval...`` resolves."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("retrieval"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(
                    f"{node.module}.{alias.name}"
                ), f"{node.module} has no {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("retrieval"):
                    importlib.import_module(alias.name)


def check_settings(retrieval: dict, block: Block) -> None:
    """The example's RETRIEVAL has only keys the app reads, and its components build."""
    from retrieval.checks import check_search_deadline, check_setting_names
    from retrieval.exceptions import InvalidComponentError
    from retrieval.services.query.pipelines import check_pipelines
    from retrieval.services.registry import HANDLERS

    with override_settings(RETRIEVAL=retrieval):
        errors = check_setting_names() + check_search_deadline() + check_pipelines()
        assert [e.msg for e in errors if e.level >= checks.ERROR] == [], block.id
        for handler in HANDLERS:
            for alias in retrieval.get(handler.kind, {}):
                try:
                    handler.create(alias)
                except InvalidComponentError as e:
                    if not names_site_code(e):
                        raise


def names_site_code(error: BaseException) -> bool:
    """Whether ``error`` comes from importing the site's own code (``myapp``, ``mysite``)."""
    while error is not None:
        if isinstance(error, ModuleNotFoundError) and error.name in SITE_MODULES:
            return True
        error = error.__cause__ or error.__context__
    return False


# Shell examples -------------------------------------------------------------------------


def shell_commands() -> list[tuple[str, list[str]]]:
    """``(where, argv)`` for each ``manage.py``/``dev.py`` call in shell blocks and inline code."""
    found = []
    for page in documentation_pages():
        text = page.read_text()
        lines = []
        for block in code_blocks(page):
            if block.language in ("bash", "sh", "shell", "console"):
                joined = block.body.replace("\\\n", " ")
                lines += [(f"{block.id}", line) for line in joined.splitlines()]
        lines += [(str(page.relative_to(ROOT)), span) for span in re.findall(r"`([^`\n]+)`", text)]
        for where, line in lines:
            for match in re.finditer(r"(?:manage|dev)\.py\s+[^|;&#]*", line):
                try:
                    argv = shlex.split(match.group(0))
                except ValueError:
                    argv = match.group(0).split()
                found.append((where, argv))
    return found


def test_shell_examples_are_found():
    commands = shell_commands()
    assert any(argv[:2] == ["manage.py", "retrieval_search"] for _, argv in commands)
    assert any(argv[:2] == ["dev.py", "test"] for _, argv in commands)


def test_shell_examples_name_commands_and_options_that_exist():
    sys.path.insert(0, str(ROOT))
    import dev

    known = get_commands()
    dev_parser = dev.build_parser()
    dev_commands = dev_parser._subparsers._group_actions[0].choices
    wrong = []
    for where, argv in shell_commands():
        if len(argv) < 2 or not re.fullmatch(r"[a-z_]+", argv[1]):
            continue  # "manage.py" named in prose, or a placeholder such as COMMAND
        name, options = argv[1], [a.split("=")[0] for a in argv[2:] if a.startswith("--")]
        if argv[0] == "dev.py":
            parser = dev_commands.get(name)
            lenient = name == "test"  # its other options go to pytest
        elif name in known:
            parser = load_command_class(known[name], name).create_parser("manage.py", name)
            lenient = False
        else:
            wrong.append(f"{where}: no command {name!r}")
            continue
        if parser is None:
            wrong.append(f"{where}: dev.py has no command {name!r}")
            continue
        accepted = {s for action in parser._actions for s in action.option_strings}
        wrong += [
            f"{where}: {argv[0]} {name} has no option {option}"
            for option in options
            if option not in accepted and not lenient
        ]
    assert wrong == []


@pytest.mark.django_db
def test_the_wagtail_guide_shows_what_retrieval_search_json_prints(settings):
    import json
    from io import StringIO

    from django.core.management import call_command

    from tests.conftest import KEYWORD_EMBEDDER, collection_of

    guide = ROOT / "docs" / "guides" / "wagtail.md"
    shown = json.loads(next(b.body for b in code_blocks(guide) if b.language == "json"))
    settings.RETRIEVAL = {**settings.RETRIEVAL, "EMBEDDERS": {"default": KEYWORD_EMBEDDER}}
    collection_of("pages", {"bread": "Sourdough bread needs a sourdough starter."})
    out = StringIO()
    call_command(
        "retrieval_search", "sourdough starter", "--collection", "pages", "--json", stdout=out
    )
    printed = json.loads(out.getvalue())
    assert set(printed) == set(shown)
    assert set(printed["results"][0]) == set(shown["results"][0])
    assert set(printed["trace"]) == set(shown["trace"])
