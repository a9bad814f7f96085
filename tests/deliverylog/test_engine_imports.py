"""The two engines are siblings over one contract: no module of one engine imports a
module (or the library) of the other, and the engine-neutral modules (the contract, the
metrics) reach neither engine, not even lazily or for type checking. Read from the source
(every import statement, at any depth), so an import inside a function counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gptools.deliverylog

PACKAGE = Path(gptools.deliverylog.__file__).resolve().parent
PREFIX = "gptools.deliverylog."

#: Each engine: its library, and the modules of ours that are its own.
ENGINES = {
    "duckdb": ("duckdb", {"_readers", "_dialect_duckdb"}),
    "spark": ("pyspark", {"_readers_spark", "_dialect_spark"}),
}
#: Modules every engine shares: they must reach no engine.
NEUTRAL = ("_contract", "_metrics", "_owner", "_files")


def _imports(module: str) -> set[str]:
    """Every module ``module`` imports, by any statement: absolute dotted names, and for
    ``from PACKAGE import NAME`` also ``PACKAGE.NAME`` (NAME may be a module)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(["gptools", "deliverylog", *([base] if base else [])])
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def _ours(names: set[str]) -> set[str]:
    """The deliverylog modules among imported names (``_readers`` for
    ``gptools.deliverylog._readers``)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {n.removeprefix(PREFIX) for n in names if n.removeprefix(PREFIX) in modules}


def _library(names: set[str], library: str) -> set[str]:
    return {n for n in names if n == library or n.startswith(f"{library}.")}


def _reach(module: str) -> set[str]:
    """Every deliverylog module ``module`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for found in _ours(_imports(todo.pop())) - seen:
            seen.add(found)
            todo.append(found)
    return seen


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_no_module_of_one_engine_imports_the_other(engine: str) -> None:
    (other,) = set(ENGINES) - {engine}
    other_library, other_modules = ENGINES[other]
    for module in sorted(ENGINES[engine][1]):
        names = _imports(module)
        assert not _ours(names) & other_modules, f"{module} imports {other}'s modules"
        assert not _library(names, other_library), f"{module} imports {other_library}"


@pytest.mark.parametrize("module", NEUTRAL)
def test_neutral_modules_reach_no_engine(module: str) -> None:
    reached = _reach(module) | {module}
    for library, modules in ENGINES.values():
        assert not reached & modules, f"{module} reaches {sorted(reached & modules)}"
        for one in reached:
            assert not _library(_imports(one), library), f"{module} reaches {library} via {one}"


def test_every_module_that_imports_an_engine_library_is_that_engines() -> None:
    """The lists above stay true: a new module importing DuckDB or PySpark must be added
    to its engine (and then obeys the rules), or be the one that chooses the engine."""
    for library, modules in ENGINES.values():
        importing = {p.stem for p in PACKAGE.glob("*.py") if _library(_imports(p.stem), library)}
        assert importing <= modules, f"{sorted(importing - modules)} import {library}"
