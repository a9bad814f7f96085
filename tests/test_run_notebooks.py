"""``gptools run-notebooks`` starts one sandbox and hands it to every notebook (issue 11,
item 6): the address it prints is the one every notebook uses, alive while they run, and
each notebook meets a fresh provider."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import nbformat

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
