"""No import circle among gptools' modules, not even a type-only or a lazy one.

Every import statement counts: module level, inside a function, under ``TYPE_CHECKING``.
A circle that Python tolerates today (one side imports lazily, or only for type checking)
still means two modules that cannot be read, tested or moved apart; the way out is the one
docs/design.md gives (what both need moves to a module of its own, or one side takes a
``typing.Protocol``). A module's own package ``__init__`` is not an edge (Python imports
it first anyway); an import of the package's names from inside the package is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gptools

PACKAGE = Path(gptools.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, source: str, modules: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` (its text: ``source``) imports, by any
    import statement."""
    is_package = modules[name].name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                # ``from package import module`` names a module; anything else a name.
                submodule = f"{module}.{alias.name}"
                targets.add(submodule if submodule in modules else module)
    # Importing a module imports its packages first: those edges are Python's, not ours.
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {t for t in targets if t in modules and t != name and t not in parents}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: _imports(name, path.read_text(encoding="utf-8"), modules)
        for name, path in modules.items()
    }


def test_no_import_circle_among_the_package_modules() -> None:
    graph = _graph()
    assert "gptools.webhooks._store" in graph["gptools.webhooks._supervision"]  # parsed
    assert not _cycles(graph), f"import circles (each a group of modules): {_cycles(graph)}"


def test_the_cycle_finder_sees_a_type_only_circle() -> None:
    """The finder itself: a circle closed by a TYPE_CHECKING or a lazy import is one."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import _faults\n"
        "if TYPE_CHECKING:\n    from gptools.sandbox._app import SandboxApp\n"
        "def f():\n    from gptools.webhooks import open_store\n"
    )
    found = _imports("gptools.sandbox._inspect", source, _modules())
    assert found == {"gptools.sandbox._app", "gptools.sandbox._faults", "gptools.webhooks"}
