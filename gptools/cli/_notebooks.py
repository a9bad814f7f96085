"""``gptools run-notebooks``: the main job (every notebook against the embedded sandbox)."""

from __future__ import annotations

from pathlib import Path

import click

from gptools.cli._main import cli, emit, fail, say
from gptools.errors import require_extra


@cli.command("run-notebooks")
@click.option(
    "--notebooks",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("notebooks"),
    show_default=True,
    help="Folder of notebooks to run.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build"),
    show_default=True,
    help="Where to write the HTML pages.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def run_notebooks_cmd(folder: Path, out_dir: Path, as_json: bool) -> None:
    """Execute every notebook against the embedded sandbox and write HTML under OUT."""
    require_extra("notebooks", "gptools run-notebooks")
    from gptools.notebook_runner import find_notebooks, run_notebook
    from gptools.sandbox import SandboxConfig, run_sandbox

    if not folder.is_dir():
        fail(f"{folder}: no such folder of notebooks", bad_input=True)
    notebooks = find_notebooks(folder)
    if not notebooks:
        fail(f"{folder} holds no notebooks (*.ipynb): nothing to run", bad_input=True)
    runs = []
    # One sandbox for the whole run, alive while the notebooks use it; reset before each
    # notebook so that each meets a fresh provider, as under nbval.
    with run_sandbox(SandboxConfig(seed=0)) as sb:
        who = ", ".join(
            f"{n} ({a.principal_type}, brands {list(a.brand_ids)})" for n, a in sb.accounts.items()
        )
        say(
            f"Embedded sandbox answers at {sb.base_url} while the notebooks run; "
            f"demo accounts: {who}"
        )
        for path in notebooks:
            say(f"running {path} ...")
            sb.reset()
            run = run_notebook(path, out_dir, sandbox_url=sb.base_url)
            say(
                f"  {'ok' if run.ok else 'FAILED'} in {run.seconds:.1f} s -> {run.html}"
                + (f"\n  {run.error}" if run.error else "")
            )
            runs.append(run)
    document = {
        "out_dir": str(out_dir.resolve()),
        "notebooks": [
            {
                "notebook": str(r.notebook),
                "html": str(r.html),
                "ok": r.ok,
                "seconds": round(r.seconds, 1),
                "error": r.error,
            }
            for r in runs
        ],
    }
    emit(
        document,
        as_json=as_json,
        human=lambda: (
            f"Rendered {len(runs)} notebook(s) into {out_dir.resolve()}/ "
            f"(open the .html files in a browser)."
        ),
    )
    if any(not r.ok for r in runs):
        fail(f"{sum(not r.ok for r in runs)} notebook(s) failed; see the pages in {out_dir}")
