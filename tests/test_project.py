"""Project-level guards: the public surface and the README's table of assumptions."""

from __future__ import annotations

import re
from pathlib import Path

import gptools
from gptools import spec

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_importable() -> None:
    assert gptools.__all__ == sorted(gptools.__all__)
    for name in gptools.__all__:
        assert getattr(gptools, name) is not None, name


def test_every_public_exception_is_exported() -> None:
    from gptools import errors

    # The classes errors.py defines itself: those it reaches in other modules (its lazy
    # table, cached in its namespace once read) are exported by their own packages
    # (tests/test_errors_root.py).
    public = {
        n
        for n, v in vars(errors).items()
        if isinstance(v, type)
        and issubclass(v, Exception)
        and v.__module__ == errors.__name__
        and not n.startswith("_")
    }
    assert public <= set(gptools.__all__)


def test_readme_assumptions_table_matches_spec() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert spec.assumptions_markdown() in readme, (
        "README's table of assumptions differs from gptools.spec; paste the output of "
        "`python -c 'from gptools import spec; print(spec.assumptions_markdown())'`"
    )


def test_every_assumption_says_assumed_and_has_reason_and_override() -> None:
    names = [a.name for a in spec.ASSUMPTIONS]
    assert len(names) == len(set(names))
    for a in spec.ASSUMPTIONS:
        assert a.reason and a.override
        for constant in re.split(r"\s*/\s*", a.name):
            assert hasattr(spec, constant), f"{constant} named by an assumption is not in spec"


def test_readme_names_exactly_the_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make run" in readme and "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [
        ln.strip()
        for ln in ci.splitlines()
        if ln.strip() and not ln.lstrip().startswith(("#", "set ", "cd "))
    ]
    assert commands == ["make test"]


def test_import_gptools_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gptools; heavy = [m for m in ('pandas', 'duckdb', 'matplotlib', "
        "'ibis', 'ipywidgets') if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"import gptools pulled in {out}"


def test_cli_registers_every_capability_group() -> None:
    from click.testing import CliRunner

    from gptools.cli import cli

    result = CliRunner().invoke(cli, ["webhooks", "--help"])
    assert result.exit_code == 0
    for command in ("serve", "export", "analyze"):
        assert command in result.output
