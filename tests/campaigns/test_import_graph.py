"""The campaigns modules import one way: no cycle, not even through a lazy import."""

from __future__ import annotations

import ast
from pathlib import Path

import gptools.campaigns

PACKAGE = Path(gptools.campaigns.__file__).parent
MODULES = sorted(
    f"gptools.campaigns.{p.stem}" for p in PACKAGE.glob("_*.py") if p.stem != "__init__"
)


def _graph() -> dict[str, set[str]]:
    # Every import statement counts, the ones inside functions too: a lazy import that
    # runs back up is still a cycle (Plan._repr_html_ once imported _display this way).
    names = {*MODULES, "gptools.campaigns"}
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        module = (
            "gptools.campaigns" if path.stem == "__init__" else f"gptools.campaigns.{path.stem}"
        )
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.add(node.module)
                targets |= {f"{node.module}.{alias.name}" for alias in node.names}
        graph[module] = {t for t in targets if t in names and t != module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            found = visit(target, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_the_campaigns_import_graph_has_no_cycle() -> None:
    graph = _graph()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    assert "gptools.campaigns._review" in graph["gptools.campaigns"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
