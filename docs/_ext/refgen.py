"""Generate the reference pages from the code, so they cannot drift from it.

Each ``*_page()`` function returns a Markdown (MyST) page; ``write_pages()`` writes them
into ``docs/reference/generated/`` when Sphinx starts a build (``retrieval_docs.py``),
and the tests call the collecting functions to fail on anything undocumented:

- settings: every key of ``retrieval.conf.DEFAULTS`` with its default and the comment
  written above it in ``conf.py`` (a key without one is an error);
- components: every component class of each kind with its options (``__init__``'s
  keyword arguments), each described by its class's docstring or by a page of ``docs/``
  that names the class and the option;
- checks: every ``retrieval.[EWI]NNN`` id in the package, with the summary in
  ``retrieval/checks.py``'s docstring and each message and hint as written in the code;
- commands: every ``retrieval_*`` management command's ``--help``;
- REST API: the OpenAPI schema drf-spectacular serves at ``/api/schema/``;
- Python API: the names ``retrieval.services`` exports, by autodoc.

Django must be set up before the collecting functions run (``setup_django()``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import os
import pkgutil
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "retrieval"
GENERATED = DOCS / "reference" / "generated"
CHECK_ID = re.compile(r"retrieval\.[EWIC]\d{3}")

#: Component kind -> (package under retrieval.services, dotted path of its base class).
COMPONENT_PACKAGES = {
    "PARSERS": ("parsers", "retrieval.services.parsers.base.BaseParser"),
    "CHUNKERS": ("chunkers", "retrieval.services.chunkers.base.BaseChunker"),
    "EMBEDDERS": ("embedders", "retrieval.services.embedders.base.BaseEmbedder"),
    "ANALYZERS": ("sparse", "retrieval.services.sparse.analyzer.Analyzer"),
    "RETRIEVERS": ("retrievers", "retrieval.services.retrievers.base.BaseRetriever"),
    "LLMS": ("llms", "retrieval.services.llms.base.BaseLLM"),
    "REWRITERS": ("rewriters", "retrieval.services.rewriters.base.BaseQueryRewriter"),
    "RERANKERS": ("rerankers", "retrieval.services.rerankers.base.BaseReranker"),
    "EXTRACTORS": ("extractors", "retrieval.services.extractors.base.BaseTripleExtractor"),
    "INDEXES": ("indexes", "retrieval.services.indexes.base.BaseIndex"),
    "QUEUES": ("queues", "retrieval.services.queues.base.BaseQueue"),
}


def setup_django() -> None:
    """Set Django up on the example project's settings without touching a database.

    The example settings start an embedded PostgreSQL unless ``DATABASE_URL`` is set;
    nothing here queries, so a URL nothing listens on is enough.
    """
    import sys

    import django
    from django.apps import apps

    if apps.ready:
        return
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DATABASE_URL", "postgres://docs:docs@127.0.0.1:9/docs")
    os.environ.setdefault("DJANGO_SECRET_KEY", "documentation-build-only")
    django.setup()


def escape(text: str) -> str:
    """Escape Markdown's punctuation in plain text (comments, messages, docstrings).

    Code marked as reStructuredText (````code````) or Markdown (```code```) stays code.
    """
    parts = re.split(r"``(.+?)``|`([^`]+)`", text)
    out = []
    for index, part in enumerate(parts):
        if index % 3 == 0:
            out.append(re.sub(r"([\\`*_\[\]<>|#])", r"\\\1", part))
        elif part is not None:
            out.append(f"`{part}`")
    return "".join(out)


# Settings ------------------------------------------------------------------------------


@dataclass
class Setting:
    key: str
    default: Any
    description: str  # "" when the key has no comment of its own


def settings() -> list[Setting]:
    """Every key of ``DEFAULTS``, described by its comments in ``conf.py``.

    A comment block describes the key below it. A run of one-line keys may follow one
    block (``MAX_SHEETS``, ``MAX_TABLE_CELLS``): each key after the first shows the
    block too, but needs a comment of its own at the end of its line, so that a key
    added under another one is not taken as described by that one's comment.
    """
    from retrieval.conf import DEFAULTS

    source = (PACKAGE / "conf.py").read_text()
    descriptions = _key_comments(source, "DEFAULTS")
    return [Setting(key, value, descriptions.get(key, "")) for key, value in DEFAULTS.items()]


def _key_comments(source: str, name: str) -> dict[str, str]:
    """Map each top-level key of the dict assigned to ``name`` to its description."""
    tree = ast.parse(source)
    node = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.AnnAssign | ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in _targets(n))
    )
    comments: dict[int, str] = {}
    trailing: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.lstrip("#").strip()
            own_line = token.line.strip().startswith("#")
            (comments if own_line else trailing)[token.start[0]] = text
    lines = source.splitlines()
    keys = {k.lineno: (k.value, v.end_lineno) for k, v in zip(node.keys, node.values, strict=True)}
    indent = node.keys[0].col_offset
    result: dict[str, str] = {}
    block: list[str] = []
    first = in_run = in_comment = False  # the block is right above / its run goes on
    line_number = node.lineno + 1
    while line_number < node.end_lineno:
        line = lines[line_number - 1]
        if line_number in keys:
            key, end = keys[line_number]
            own = trailing.get(line_number, "")
            shared = " ".join(block) if in_run else ""
            described = first or bool(own)
            result[key] = " ".join(filter(None, [shared, own])) if described else ""
            in_run = in_run and end == line_number  # a one-line key lets the run go on
            first = in_comment = False
            line_number = end + 1
            continue
        if line_number in comments and len(line) - len(line.lstrip()) == indent:
            if not in_comment:
                block = []
            block.append(comments[line_number])
            first = in_run = in_comment = True
        elif not line.strip():
            first = in_run = in_comment = False
        line_number += 1
    return result


def _targets(node: ast.AST) -> list[ast.expr]:
    return [node.target] if isinstance(node, ast.AnnAssign) else list(node.targets)


def settings_page() -> str:
    from retrieval.conf import COMPONENT_KINDS

    out = [
        "# Every setting",
        "",
        "Generated from `retrieval.conf.DEFAULTS` at each build: every key a site may put in",
        "`RETRIEVAL = {...}`, its default, and the comment written above it in",
        "`retrieval/conf.py`. The component kinds (" + ", ".join(COMPONENT_KINDS) + ") are",
        "merged per alias; their backends' options are listed in [](components.md).",
        "How the settings work together: [](../settings.md).",
        "",
    ]
    mentions = _page_mentions()
    for setting in settings():
        out += [f"## `{setting.key}`", "", escape(setting.description) or "**Undocumented.**", ""]
        out += ["```python", f"{setting.key!r}: {_python(setting.default)}", "```", ""]
        pages = [page for page, text in mentions.items() if setting.key in text]
        if pages:
            out += ["Explained in: " + ", ".join(f"[](/{page})" for page in pages) + ".", ""]
    return "\n".join(out)


def _python(value: Any) -> str:
    import pprint

    return pprint.pformat(value, width=80, sort_dicts=False)


def _page_mentions() -> dict[str, str]:
    """The hand-written pages' text by path (relative to docs/), generated ones left out."""
    return {
        str(path.relative_to(DOCS)): path.read_text()
        for path in sorted(DOCS.rglob("*.md"))
        if GENERATED not in path.parents and "_build" not in path.parts
    }


# Components ----------------------------------------------------------------------------


@dataclass
class Option:
    name: str
    default: str
    description: str
    pages: list[str] = field(default_factory=list)


@dataclass
class Component:
    kind: str
    path: str
    summary: str
    aliases: list[str]
    options: list[Option]


def components() -> list[Component]:
    """Every concrete component class of each kind, with its options."""
    from django.utils.module_loading import import_string

    from retrieval.conf import DEFAULTS

    mentions = _page_mentions()
    found = []
    for kind, (package, base_path) in COMPONENT_PACKAGES.items():
        base = import_string(base_path)
        aliases: dict[str, list[str]] = {}
        for alias, config in DEFAULTS[kind].items():
            aliases.setdefault(config["BACKEND"], []).append(alias)
        for cls in _classes(f"retrieval.services.{package}", base):
            path = f"{cls.__module__}.{cls.__qualname__}"
            options = [_option(cls, p, mentions) for p in _parameters(cls)]
            summary = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
            found.append(Component(kind, path, summary, aliases.get(path, []), options))
    return found


def _classes(package: str, base: type) -> Iterator[type]:
    module = importlib.import_module(package)
    names = [package]
    if hasattr(module, "__path__"):
        names += [f"{package}.{m.name}" for m in pkgutil.iter_modules(module.__path__)]
    for name in names:
        for cls in vars(importlib.import_module(name)).values():
            if (
                inspect.isclass(cls)
                and cls.__module__ == name
                and issubclass(cls, base)
                and not inspect.isabstract(cls)
                and not cls.__name__.startswith(("_", "Base"))
            ):
                yield cls


def _parameters(cls: type) -> list[inspect.Parameter]:
    """The keyword arguments of ``cls``, with its bases' where ``**options`` passes them on."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or not klass.__module__.startswith("retrieval."):
            continue
        parameters = inspect.signature(klass.__init__).parameters.values()
        for p in parameters:
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                found.setdefault(p.name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    return list(found.values())


def _docstrings(cls: type) -> str:
    """The docstrings an option of ``cls`` may be described in: its classes' and modules'."""
    texts = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("retrieval."):
            continue
        init = vars(klass).get("__init__")
        texts += [klass.__doc__, getattr(init, "__doc__", None)]
        texts.append(importlib.import_module(klass.__module__).__doc__)
    return "\n\n".join(inspect.cleandoc(t) for t in texts if t)


def _option(cls: type, parameter: inspect.Parameter, mentions: dict[str, str]) -> Option:
    name = parameter.name
    default = "(required)" if parameter.default is parameter.empty else repr(parameter.default)
    docs = _docstrings(cls)
    field = re.search(rf"^:param {re.escape(name)}:(.*(?:\n[ \t]+.*)*)", docs, re.MULTILINE)
    if field:
        sentences = [" ".join(field.group(1).split())]
    else:
        prose = re.sub(r"^:param .*(?:\n[ \t]+.*)*", "", docs, flags=re.MULTILINE)
        sentences = [
            " ".join(s.split())
            for s in re.split(r"(?<=\.)\s+(?=[A-Z(`*])|\n\n", prose)
            if re.search(rf"``{re.escape(name)}``", s)
        ]
    pattern = re.compile(rf"`{re.escape(name)}[`=]|\b{re.escape(name)}=|\"{re.escape(name)}\"")
    pages = [
        page for page, text in mentions.items() if cls.__name__ in text and pattern.search(text)
    ]
    return Option(name, default, " ".join(sentences), pages)


def undocumented_options() -> list[str]:
    """``Class.option`` for each option neither its docstring nor a page describes."""
    return [
        f"{component.path}.{option.name}"
        for component in components()
        for option in component.options
        if not option.description and not option.pages
    ]


def components_page() -> str:
    from retrieval.conf import COMPONENT_KINDS

    out = [
        "# Component options",
        "",
        "Generated from the component classes at each build. A component is named in",
        '`RETRIEVAL[KIND]` as `{"BACKEND": dotted path, "OPTIONS": {...}}`; the options',
        "are the class's keyword arguments, listed here with their defaults. Built-in",
        "aliases are those of `retrieval.conf.DEFAULTS` ([](settings.md)).",
        "",
    ]
    by_kind: dict[str, list[Component]] = {}
    for component in components():
        by_kind.setdefault(component.kind, []).append(component)
    for kind in COMPONENT_KINDS:
        out += [f"## `{kind}`", ""]
        for component in by_kind.get(kind, []):
            out += [f"### `{component.path.rsplit('.', 1)[1]}`", ""]
            out += [f"`{component.path}`"]
            if component.aliases:
                out[-1] += " (built-in alias " + ", ".join(f"`{a}`" for a in component.aliases)
                out[-1] += ")"
            out += ["", component.summary, ""]
            if not component.options:
                out += ["No options.", ""]
                continue
            out += ["| option | default | description |", "|---|---|---|"]
            for option in component.options:
                described = _cell(option.description)
                if option.pages:
                    see = ", ".join(f"[](/{page})" for page in option.pages)
                    described = f"{described} See {see}." if described else f"See {see}."
                out.append(f"| `{option.name}` | `{_cell(option.default)}` | {described} |")
            out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


# System checks -------------------------------------------------------------------------


@dataclass
class CheckMessage:
    id: str
    level: str
    message: str
    hint: str
    where: str


def check_ids_in_code() -> set[str]:
    """Every check id written anywhere in the package's Python files."""
    return {
        match
        for path in PACKAGE.rglob("*.py")
        if "migrations" not in path.parts
        for match in CHECK_ID.findall(path.read_text())
    }


def check_summaries() -> dict[str, str]:
    """The one-line summary of each id in ``retrieval/checks.py``'s docstring."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "checks.py").read_text())) or ""
    summaries: dict[str, str] = {}
    for item in re.split(r"\n- ", "\n" + doc):
        head, _, text = item.partition(": ")
        ids = re.findall(r"``(retrieval\.)?([EWIC]\d{3})``", head)
        for _prefix, short in ids:
            summaries[f"retrieval.{short}"] = " ".join(text.split())
        # "``retrieval.W020`` / ``W021``: ... and ``retrieval.E022``: ..." names more ids
        for extra in re.findall(r"``retrieval\.([EWIC]\d{3})``: ([^`]+?)(?=\(|$)", text):
            summaries[f"retrieval.{extra[0]}"] = " ".join(extra[1].split())
    return summaries


def check_messages() -> list[CheckMessage]:
    """Each ``checks.Error(...)``/``Warning(...)`` with a literal id, as written."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            level = _call_name(node.func)
            if level not in ("Error", "Warning", "Info", "Critical", "Debug"):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            ident = keywords.get("id")
            if not (isinstance(ident, ast.Constant) and isinstance(ident.value, str)):
                continue
            message = _text(node.args[0]) if node.args else _text(keywords.get("msg"))
            hint = _text(keywords["hint"]) if "hint" in keywords else ""
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            found.append(CheckMessage(ident.value, level, message, hint, where))
    return found


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _text(node: ast.expr | None) -> str:
    """A message as written: literal text, with ``{expression}`` where it is computed."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(v.value) if isinstance(v, ast.Constant) else _placeholder(v.value)
            for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "str":
        return "(the message of the error raised)"
    return _placeholder(node)


def _placeholder(node: ast.expr) -> str:
    """``{name}`` for a value named in the code, ``{...}`` for one computed there."""
    simple = isinstance(node, ast.Name | ast.Attribute) and "(" not in ast.unparse(node)
    return "{" + (ast.unparse(node) if simple else "...") + "}"


def checks_page() -> str:
    summaries = check_summaries()
    messages: dict[str, list[CheckMessage]] = {}
    for message in check_messages():
        messages.setdefault(message.id, []).append(message)
    out = [
        "# System checks",
        "",
        "Generated from the code at each build: every check id the app can report, with",
        "the summary in `retrieval/checks.py` and each message and hint as the code writes",
        "them (`{...}` stands for a value filled in when the check runs). Checks that ask",
        "a database or a server run only with `manage.py check --database default`.",
        "",
    ]
    for ident in sorted(check_ids_in_code(), key=lambda i: (i[10], i[11:])):
        out += [f"## `{ident}`", "", escape(summaries.get(ident, "")) or "**Undocumented.**", ""]
        for message in messages.get(ident, []):
            out += [f"- {message.level}: {escape(message.message)}"]
            if message.hint:
                out += [f"  *Hint:* {escape(message.hint)}"]
            out += [f"  (`{message.where}`)"]
        out.append("")
    return "\n".join(out)


# Management commands -------------------------------------------------------------------


def command_names() -> list[str]:
    from django.core.management import get_commands

    return sorted(name for name, app in get_commands().items() if app == "retrieval")


def command_parser(name: str) -> Any:
    from django.core.management import load_command_class

    return load_command_class("retrieval", name).create_parser("manage.py", name)


def commands_page() -> str:
    os.environ["COLUMNS"] = "90"  # argparse wraps at the terminal's width
    out = [
        "# Management commands",
        "",
        "Generated from each command's `--help` at each build. Run them with",
        "`python manage.py NAME`.",
        "",
    ]
    for name in command_names():
        out += [f"## `{name}`", "", "```text", command_parser(name).format_help().rstrip()]
        out += ["```", ""]
    return "\n".join(out)


# REST API ------------------------------------------------------------------------------


def openapi_schema() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def rest_api_page() -> str:
    schema = openapi_schema()
    out = [
        "# REST API operations",
        "",
        "Generated from the OpenAPI schema at each build (the site serves the same schema",
        "at `/api/schema/` and Swagger UI at `/api/docs/`). Paths are as the example",
        "project mounts the API, under `/api/`. What the API does: [](../rest-api.md).",
        "",
    ]
    for path, operations in schema["paths"].items():
        out += [f"## `{path}`", ""]
        for method, operation in operations.items():
            if method.startswith("x-") or not isinstance(operation, dict):
                continue
            out += [f"### `{method.upper()} {path}`", ""]
            description = operation.get("description") or operation.get("summary") or ""
            if description:
                out += [escape(" ".join(description.split())), ""]
            parameters = operation.get("parameters", [])
            if parameters:
                out += ["| parameter | in | type | description |", "|---|---|---|---|"]
                for p in parameters:
                    kind = p.get("schema", {}).get("type", "")
                    text = _cell(escape(" ".join(p.get("description", "").split())))
                    out.append(f"| `{p['name']}` | {p['in']} | {kind} | {text} |")
                out.append("")
            body = operation.get("requestBody", {}).get("content", {})
            if body:
                kinds = ", ".join(
                    f"`{media}` ({_ref(content.get('schema', {}))})"
                    for media, content in body.items()
                )
                out += [f"Request body: {kinds}.", ""]
            responses = operation.get("responses", {})
            if responses:
                codes = [f"`{code}` {_response(r)}".rstrip() for code, r in responses.items()]
                out += ["Responses: " + "; ".join(codes) + ".", ""]
    schemas = schema.get("components", {}).get("schemas", {})
    if schemas:
        out += ["## Schemas", ""]
        for name, body in schemas.items():
            out += [f"### `{name}`", ""]
            if body.get("description"):
                out += [escape(" ".join(body["description"].split())), ""]
            properties = body.get("properties", {})
            required = set(body.get("required", []))
            if properties:
                out += ["| field | type | description |", "|---|---|---|"]
                for field_name, prop in properties.items():
                    mark = " (required)" if field_name in required else ""
                    if prop.get("readOnly"):
                        mark += " (read-only)"
                    text = _cell(escape(" ".join(prop.get("description", "").split())))
                    out.append(f"| `{field_name}`{mark} | {_ref(prop)} | {text} |")
                out.append("")
            elif body.get("enum"):
                out += ["One of " + ", ".join(f"`{v}`" for v in body["enum"]) + ".", ""]
    return "\n".join(out)


def _response(response: dict[str, Any]) -> str:
    return _ref(response.get("content", {}).get("application/json", {}).get("schema", {}))


def _ref(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return "`" + schema["$ref"].rsplit("/", 1)[1] + "`"
    if schema.get("type") == "array":
        return "array of " + _ref(schema.get("items", {}))
    if "allOf" in schema or "oneOf" in schema:
        return " or ".join(_ref(s) for s in schema.get("allOf", schema.get("oneOf", [])))
    return schema.get("type", "")


# Python API ----------------------------------------------------------------------------


def python_api_page() -> str:
    import retrieval.services as services

    out = [
        "# Python API",
        "",
        "Generated from the docstrings at each build: the names `retrieval.services`",
        "exports (`from retrieval.services import search`).",
        "",
    ]
    for name in services.__all__:
        obj = getattr(services, name)
        directive = "autoclass" if inspect.isclass(obj) else "autofunction"
        out += [f"## `{name}`", "", f"```{{{directive}}} retrieval.services.{name}"]
        if directive == "autoclass":
            out += [":members:"]
        out += ["```", ""]
    return "\n".join(out)


PAGES = {
    "settings.md": settings_page,
    "components.md": components_page,
    "checks.md": checks_page,
    "commands.md": commands_page,
    "rest-api.md": rest_api_page,
    "python-api.md": python_api_page,
}


def write_pages(target: Path = GENERATED) -> list[Path]:
    """Write every generated page (only those whose text changed, so Sphinx rebuilds less)."""
    setup_django()
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, page in PAGES.items():
        path = target / name
        text = page() + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written
