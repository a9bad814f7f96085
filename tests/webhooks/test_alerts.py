"""The Prometheus alerting rules shipped with the package (``gptools.webhooks.ALERT_RULES``):
``promtool check rules`` and ``promtool test rules`` (tests/webhooks/alerts_test.yml, unit
tests over synthetic series) pass, every metric the rules read is one the receiver really
exports, and the file is package data. promtool (Debian's ``prometheus`` package) is
installed by ``scripts/ensure-promtool`` (``make test`` runs it); without it these fail."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import httpx
import pytest

from gptools.webhooks import ALERT_RULES, ReceiverAuth, WebhookReceiver
from tests._support.tools import installed
from tests.webhooks.conftest import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
UNIT_TESTS = Path(__file__).with_name("alerts_test.yml")


@pytest.fixture(scope="module")
def promtool() -> str:
    """promtool's path, installed from the project's script when missing."""
    return installed("promtool", "ensure-promtool")


def test_promtool_checks_the_rules(promtool: str) -> None:
    run = subprocess.run(
        [promtool, "check", "rules", str(ALERT_RULES)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS: 6 rules found" in run.stdout


def test_promtool_unit_tests_pass(promtool: str, tmp_path: Path) -> None:
    # The unit tests name the rules file beside them.
    shutil.copy(ALERT_RULES, tmp_path / "alerts.yml")
    shutil.copy(UNIT_TESTS, tmp_path / "alerts_test.yml")
    run = subprocess.run(
        [promtool, "test", "rules", "alerts_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def test_every_metric_the_rules_read_is_exported(tmp_path: Path) -> None:
    rules = ALERT_RULES.read_text()
    named = set(re.findall(r"\b(gptools_webhook_[a-z_]+)", rules))
    assert len(named) >= 6
    receiver = WebhookReceiver(f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        exposition = httpx.get(f"{srv.base_url}/metrics").text
    families = set(re.findall(r"^# TYPE (\S+) ", exposition, re.MULTILINE))
    # A histogram's series are NAME_bucket/_sum/_count, a counter's NAME_total.
    exported = families | {f + "_bucket" for f in families} | {f + "_total" for f in families}
    assert named <= exported, named - exported
    assert 'up{job="gptools-webhooks"}' in rules


def test_the_rules_are_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = project["tool"]["setuptools"]["package-data"]
    assert ALERT_RULES.name in data["gptools.webhooks"]
    assert ALERT_RULES.parent == ROOT / "gptools" / "webhooks"
