"""``gptools run-notebooks`` starts one sandbox and hands it to every notebook (issue 11,
item 6): the address it prints is the one every notebook uses, alive while they run, and
each notebook meets a fresh provider."""

from __future__ import annotations

import html
import json
import os
import re
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests._support.cli import run_gptools

NOTEBOOK_CODE = """\
from datetime import datetime
from decimal import Decimal

from gptools.models import CampaignRequest
from gptools.session import connect, embedded_sandbox

client = connect(account="partner")
request = CampaignRequest(
    type="FREE_ROUNDS", name="run-notebooks test", bet_number=10,
    game_ids=["golden-pharaoh"], bet=Decimal("0.10"), currency_code="EUR",
    start_date=datetime(2030, 3, 1), end_date=datetime(2030, 3, 8), time_zone="Europe/Malta")
created = client.create_campaign(request, brand=201)
client.add_participants(created.campaign_id, ["p-1", "p-2"], brand=201)
sandbox = embedded_sandbox()
print("USING", client.base_url, "SEES", sandbox.base_url)
print("CAMPAIGN", created.campaign_id, "STORED", len(sandbox.state.campaigns),
      "PLAYERS", sorted(sandbox.state.participants(created.campaign_id)))
"""


def _notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(NOTEBOOK_CODE)]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, path)


def test_one_sandbox_serves_every_notebook(tmp_path: Path) -> None:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("a_first.ipynb", "b_second.ipynb"):
        _notebook(folder / name)
    out = tmp_path / "build"
    env = {**os.environ, "GP_BASE_URL": "https://must-not-be-used.invalid"}
    env.pop("GPTOOLS_SANDBOX_URL", None)
    done = run_gptools(
        *("run-notebooks", "--notebooks", str(folder), "--out", str(out), "--json"),
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert all(n["ok"] for n in json.loads(done.stdout)["notebooks"])
    announced = re.findall(r"Embedded sandbox answers at (http://127\.0\.0\.1:\d+)", done.stderr)
    assert len(announced) == 1, done.stderr
    for name in ("a_first", "b_second"):
        page = html.unescape((out / f"{name}.html").read_text(encoding="utf-8"))
        used = re.search(r"USING (\S+) SEES (\S+)", page)
        assert used is not None, name
        assert used.group(1) == used.group(2) == announced[0]
        # Reset before each notebook: both create the first campaign of a fresh provider,
        # and the inspection view in the kernel reads the run's sandbox.
        assert "CAMPAIGN CMP-000001 STORED 1 PLAYERS ['p-1', 'p-2']" in page


USER_FILES_CODE = """\
import subprocess, sys, tempfile
from datetime import UTC, datetime
from pathlib import Path

from gptools.campaigns import apply_plan, load_plan
from gptools.participants import load_participants
from gptools.session import connect

client = connect(account="partner")
plan = load_plan(PLAN)
applied = apply_plan(client, plan, now=datetime(2029, 12, 1, tzinfo=UTC))
load_participants(client, applied.campaign_ids["EUR"], ["p-1", "p-2"], brand=201,
                  progress=False)
work = Path(tempfile.mkdtemp(prefix="gptools-nb-"))
(work / "scratch.txt").write_text("a notebook's own file")
cli = Path(sys.executable).parent / "gptools"
listed = subprocess.run([str(cli), "campaigns", "list"], capture_output=True, text=True)
print("LISTED", listed.returncode)
"""


def test_a_notebook_leaves_the_users_files_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 35 item 2: what a notebook run by the main job writes (the campaign register,
    the loader's journals, the CLI sandbox's state, temporary folders) goes to a folder of
    its own, deleted when it ends; the user's register, cache and temp stay untouched."""
    from gptools.notebook_runner import run_notebook

    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "GPTOOLS_REGISTER", "GPTOOLS_JOURNAL_DIR",
                 "GPTOOLS_SANDBOX_STATE_DIR", "GPTOOLS_SANDBOX_URL"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GP_BASE_URL", "")
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    plan = Path(__file__).resolve().parents[1] / "data" / "example_plan.yaml"
    nb.cells = [nbformat.v4.new_code_cell(f"PLAN = {str(plan)!r}\n" + USER_FILES_CODE)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}  # fmt: skip
    nbformat.write(nb, folder / "writes.ipynb")
    run = run_notebook(folder / "writes.ipynb", tmp_path / "build")
    assert run.ok, run.error
    assert "LISTED 0" in (tmp_path / "build" / "writes.html").read_text(encoding="utf-8")
    # Jupyter keeps its own files in the home folder (~/.ipython); gptools none.
    assert sorted(p.relative_to(home) for p in home.rglob("*gptools*")) == []
    assert sorted(p.name for p in temp.iterdir()) == []
