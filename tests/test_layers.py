"""The package's imports keep its layers: read from the source (AST), nothing imported.

- The folders (and top-level modules) of ``retrieval/services/`` stand in ``LAYERS``, from
  the ground up; a module imports from its own layer or the layers below, never above, and
  no two folders import each other, even through others.
- No import circle among modules but ``conf`` <-> ``registry``.
- Nothing in ``retrieval/services/`` imports ``tasks``, ``api``, ``admin`` or ``views``.

Imports inside functions count. An import under ``if TYPE_CHECKING:`` counts for circles
but not for layers: it names a type for the checker and loads nothing (``core.legs``
annotates its legs with ``BaseRetriever``, the interface its callers hand it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import retrieval

PACKAGE = Path(retrieval.__file__).parent
SERVICES = "retrieval.services"

#: The layers of ``retrieval/services/``, the ground first: each folder or top-level module
#: imports from its own layer and the ones below it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vocabulary", ("core", "types", "registry", "visibility")),
    (
        "components",
        (
            "access",
            "chunkers",
            "clients",
            "embedders",
            "extractors",
            "indexes",
            "llms",
            "parsers",
            "queues",
            "rerankers",
            "rewriters",
            "sparse",
        ),
    ),
    ("workflows", ("agentic", "graph", "ingestion", "retrievers")),
    ("search", ("query",)),
    ("faces", ("answers", "quality", "results", "tools", "warmup")),
)

#: Imports known to break the layers, each with the reason; an entry that no longer
#: occurs fails the test, so the list only shrinks.
KNOWN_BREAKS: dict[tuple[str, str], str] = {}

ALLOWED_CIRCLES = [{"retrieval.conf", "retrieval.services.registry"}]
UPWARD = ("tasks", "api", "admin", "views")


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Return every module of the app (migrations aside) by dotted name."""
    found = {}
    for path in package.rglob("*.py"):
        relative = path.relative_to(package.parent).with_suffix("")
        if "migrations" in relative.parts:
            continue
        found[".".join(relative.parts).removesuffix(".__init__")] = path
    return found


def _typing_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _nodes(tree: ast.AST, *, typing: bool) -> Iterator[ast.AST]:
    """Walk ``tree``, leaving out the body of ``if TYPE_CHECKING:`` unless ``typing``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if not typing and _typing_only(node):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports(module: str, path: Path, known: dict[str, Path], *, typing: bool) -> set[str]:
    """Return the app's modules that ``module`` imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in _nodes(ast.parse(path.read_text()), typing=typing):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    targets = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            targets.add(name)
    return targets


def graph(known: dict[str, Path], *, typing: bool) -> dict[str, set[str]]:
    return {module: imports(module, path, known, typing=typing) for module, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected parts of ``edges`` with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                other = stack.pop()
                part.append(other)
                if other == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def unit(module: str) -> str | None:
    """Return the folder or top-level module of ``retrieval/services/`` that holds ``module``."""
    parts = module.split(".")
    return parts[2] if module.startswith(f"{SERVICES}.") else None


def layer_of() -> dict[str, int]:
    return {name: level for level, (_, names) in enumerate(LAYERS) for name in names}


def folder_edges(edges: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """Return the imports between ``services/`` units, known breaks aside, by pair of units."""
    found: dict[tuple[str, str], list[str]] = {}
    for module, targets in edges.items():
        for target in targets:
            pair = (unit(module), unit(target))
            if None in pair or pair[0] == pair[1] or (module, target) in KNOWN_BREAKS:
                continue
            found.setdefault(pair, []).append(f"{module} -> {target}")
    return found


def climbs(edges: dict[str, set[str]]) -> list[str]:
    """Return the imports from a ``services/`` unit into a layer above its own."""
    level = layer_of()
    return sorted(
        line
        for (source, target), lines in folder_edges(edges).items()
        if level[target] > level[source]
        for line in lines
    )


def folder_circles(edges: dict[str, set[str]]) -> list[str]:
    """Return each circle of ``services/`` units with the imports that close it."""
    pairs = folder_edges(edges)
    units: dict[str, set[str]] = {}
    for source, target in pairs:
        units.setdefault(source, set()).add(target)
    found = []
    for part in circles(units):
        ties = [
            line
            for pair, lines in sorted(pairs.items())
            if set(pair) <= set(part)
            for line in lines
        ]
        found.append(f"{', '.join(part)}: {'; '.join(ties)}")
    return found


@pytest.fixture(scope="module")
def known() -> dict[str, Path]:
    return modules()


def test_every_services_folder_stands_in_one_layer(known):
    declared = [name for _, names in LAYERS for name in names]
    assert len(declared) == len(set(declared)), "a folder stands in two layers"
    present = {unit(module) for module in known} - {None}
    assert present - set(declared) == set(), "place the new folder in LAYERS"
    assert set(declared) - present == set(), "LAYERS names a folder that is gone"


def test_no_services_module_imports_from_a_layer_above_its_own(known):
    assert climbs(graph(known, typing=False)) == []


def test_no_two_services_folders_import_each_other(known):
    assert folder_circles(graph(known, typing=False)) == []


def test_known_breaks_still_occur(known):
    edges = graph(known, typing=False)
    gone = [pair for pair in KNOWN_BREAKS if pair[1] not in edges.get(pair[0], ())]
    assert gone == [], "remove the mended imports from KNOWN_BREAKS"


def test_no_import_circle_but_conf_and_registry(known):
    found = circles(graph(known, typing=True))
    assert [part for part in found if not any(set(part) <= ok for ok in ALLOWED_CIRCLES)] == []


def test_services_never_import_tasks_api_admin_or_views(known):
    edges = graph(known, typing=True)
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in edges.items()
        if module.startswith(f"{SERVICES}.")
        for target in targets
        if target.split(".")[1] in UPWARD
    )
    assert upward == []


def test_the_models_stand_below_the_services(known):
    """The models import no service: what they validate with (``retrieval.validation``) and
    build queries with stands beside them, so any service can import a model."""
    edges = graph(known, typing=False)
    models = [m for m in known if m == "retrieval.models" or m.startswith("retrieval.models_")]
    assert (
        models
        and sorted(
            f"{module} -> {target}"
            for module in models
            for target in edges[module]
            if target.startswith(f"{SERVICES}.")
        )
        == []
    )


def test_a_climbing_import_is_caught(tmp_path):
    """The checks see an import from the vocabulary up into the search workflow."""
    package = tmp_path / "retrieval"
    for name, text in {
        "__init__.py": "",
        "services/__init__.py": "",
        "services/core/__init__.py": "",
        "services/core/filters.py": "def f():\n    from retrieval.services.query.search import g\n",
        "services/query/__init__.py": "",
        "services/query/search.py": "from retrieval.services.core.filters import f\n\ng = f\n",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    edges = graph(modules(package), typing=False)
    assert climbs(edges) == ["retrieval.services.core.filters -> retrieval.services.query.search"]
    assert folder_circles(edges) == [
        "core, query: retrieval.services.core.filters -> retrieval.services.query.search; "
        "retrieval.services.query.search -> retrieval.services.core.filters"
    ]


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        (
            "retrieval.services.query.databases",
            "retrieval.services.core.databases",
            ["primary_database", "read_primary", "search_database"],
        ),
        ("retrieval.services.query.fusion", "retrieval.services.core.fusion", ["rrf_fuse"]),
        (
            "retrieval.services.quality.search_log",
            "retrieval.services.query.search_log",
            ["traced_as", "untraced"],
        ),
    ],
)
def test_documented_paths_of_moved_modules_still_import(old, new, names):
    from importlib import import_module

    before, after = import_module(old), import_module(new)
    assert [getattr(before, name) for name in names] == [getattr(after, name) for name in names]
