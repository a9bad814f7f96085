"""The public surface, written down: each public module's ``__all__`` says exactly what it
publishes (httpx's ``tests/test_exported_members.py``), ``gptools.__all__`` is written once,
and the whole surface with its signatures equals the checked-in ``tests/public_api.txt``."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gptools
from tests import public_surface

ROOT = Path(__file__).resolve().parents[1]


def _source(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _bound_names(module: str) -> set[str]:
    """The public names a module binds at its top level: what it defines, and for a
    package's ``__init__`` also what it imports from gptools (that is what it re-exports).
    Imports under ``if TYPE_CHECKING`` and imports of other libraries are not bindings a
    user should reach through us."""
    tree = ast.parse(_source(module).read_text(encoding="utf-8"))
    package = _source(module).name == "__init__.py"
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif (
            package
            and isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("gptools")
        ):
            names |= {a.asname or a.name for a in node.names}
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("module", public_surface.public_modules())
def test_all_names_exactly_what_the_module_publishes(module: str) -> None:
    mod = importlib.import_module(module)
    declared = list(getattr(mod, "__all__", []))
    assert declared, f"{module} has no __all__"
    assert len(declared) == len(set(declared)), f"{module}.__all__ repeats a name"
    missing = sorted(n for n in declared if not hasattr(mod, n))
    assert not missing, f"{module}.__all__ names what does not exist: {missing}"
    unlisted = sorted(_bound_names(module) - set(declared))
    assert not unlisted, (
        f"{module} binds public names its __all__ does not list: {unlisted}; add them to "
        "__all__ if users call them, or make them private (an underscore name, or import "
        "them from the private module that defines them)"
    )


def test_gptools_all_is_sorted_and_each_name_comes_from_exactly_one_module() -> None:
    assert gptools.__all__ == sorted(gptools.__all__)
    tree = ast.parse(_source("gptools").read_text(encoding="utf-8"))
    starred = sorted(
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.names[0].name == "*"
    )
    # the star imports type checkers read and the modules the lazy lookup reads agree
    assert starred == sorted(gptools._SOURCES)
    for name in gptools.__all__:
        homes = [m for m in gptools._SOURCES if name in gptools._declared(m)]
        assert len(homes) == 1, f"gptools.{name} is declared by {homes or 'no module'}"
        assert getattr(gptools, name) is getattr(importlib.import_module(homes[0]), name)


def test_a_name_outside_all_is_not_an_attribute() -> None:
    with pytest.raises(AttributeError, match="no attribute 'error_class'"):
        gptools.error_class  # noqa: B018  (in gptools.errors.__all__, not in gptools')


def test_the_public_surface_equals_the_checked_in_listing() -> None:
    expected = public_surface.LISTING.read_text(encoding="utf-8")
    actual = public_surface.surface()
    assert actual == expected, (
        f"The public surface differs from {public_surface.LISTING.name}. If the change is "
        f"intended, run `{public_surface.REGENERATE}` (or `make public-api`) and commit the "
        "file, so the change shows in review."
    )


def test_the_listing_does_not_depend_on_the_hash_seed() -> None:
    """Sets and dicts iterate by hash; the listing must not."""
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-m", "tests.public_surface"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert other == public_surface.surface()


def test_stable_repr_hides_addresses_and_orders_sets() -> None:
    assert public_surface.stable_repr(frozenset({"b", "a"})) == "frozenset({'a', 'b'})"
    assert public_surface.stable_repr(object()) == "<object>"
    assert public_surface.stable_repr(Path("x")) == f"{type(Path('x')).__name__}('x')"
