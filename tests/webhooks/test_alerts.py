"""The Prometheus alerting rules shipped with the package (``gptools.webhooks.ALERT_RULES``)
and its Grafana dashboard (``GRAFANA_DASHBOARD``): ``promtool check rules`` and ``promtool
test rules`` (tests/webhooks/alerts_test.yml, unit tests over synthetic series) pass, every
rule has a case where it fires and one where it stays quiet, aggregates per job, and links
a runbook section that exists in the operations guide; every metric the rules and the
dashboard read is one the receiver really exports, and both files are package data.
promtool (Debian's ``prometheus`` package) is installed by ``scripts/ensure-promtool``
(``make test`` runs it); without it these fail. tests/webhooks/test_prometheus_server.py
runs both in a real Prometheus."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from markdown.extensions.toc import slugify

from gptools import spec
from gptools.webhooks import ALERT_RULES, GRAFANA_DASHBOARD, ReceiverAuth, WebhookReceiver
from tests._support.tools import installed
from tests.webhooks.conftest import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
UNIT_TESTS = Path(__file__).with_name("alerts_test.yml")
OPERATIONS = ROOT / "docs" / "guides" / "operations.md"
#: The page of the documentation site that holds the runbooks (mkdocs.yml builds it with
#: use_directory_urls false: docs/X.md becomes X.html).
RUNBOOK_PAGE = "guides/operations.html"


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(ALERT_RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _heading_anchors(markdown: str) -> set[str]:
    """The ids mkdocs' toc extension gives the page's headings (explicit ``{#id}`` too)."""
    anchors = set()
    for line in markdown.splitlines():
        if heading := re.match(r"#+\s+(.*?)\s*(?:\{#([\w-]+)\})?\s*$", line):
            anchors.add(heading[2] or slugify(heading[1], "-"))
    return anchors


@pytest.fixture(scope="module")
def promtool() -> str:
    """promtool's path, installed from the project's script when missing."""
    return installed("promtool", "ensure-promtool")


def test_promtool_checks_the_rules(promtool: str) -> None:
    run = subprocess.run(
        [promtool, "check", "rules", str(ALERT_RULES)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in run.stdout


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


def test_every_rule_fires_in_a_unit_test_and_stays_quiet_in_another() -> None:
    cases = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    checks = [check for case in cases for check in case.get("alert_rule_test", [])]
    firing = {c["alertname"] for c in checks if c["exp_alerts"]}
    quiet = {c["alertname"] for c in checks if not c["exp_alerts"]}
    names = {rule["alert"] for rule in _rules()}
    assert names - firing == set(), "never seen firing"
    assert names - quiet == set(), "never seen quiet"
    # Every alert it expects is one alert per job: never an instance's.
    for check in checks:
        for alert in check["exp_alerts"]:
            assert set(alert["exp_labels"]) == {"severity", "job"}, check


def test_every_rule_is_one_alert_per_job_with_a_severity_and_a_runbook() -> None:
    anchors = _heading_anchors(OPERATIONS.read_text())
    for rule in _rules():
        expr = " ".join(rule["expr"].split())
        # Every aggregation keeps the job and nothing more (the Down/NotReady rules match
        # each instance's series on (job, instance) before they count them per job).
        assert re.findall(r"\b(?:count|sum|min|max) by \(([^)]*)\)", expr), rule["alert"]
        for kept in re.findall(r"\b(?:count|sum|min|max) by \(([^)]*)\)", expr):
            assert kept in ("job", "job, le"), (rule["alert"], kept)
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert "for" in rule, rule["alert"]
        page, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert page == RUNBOOK_PAGE, rule["alert"]
        assert anchor == slugify(rule["alert"], "-"), rule["alert"]
        assert anchor in anchors, f"{rule['alert']}: no section #{anchor} in {OPERATIONS.name}"
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^use_directory_urls: false$", mkdocs, re.MULTILINE)
    assert Path(ROOT / "docs" / RUNBOOK_PAGE).with_suffix(".md") == OPERATIONS


def test_the_retry_horizon_alert_counts_from_the_documents_seven_days() -> None:
    (rule,) = [r for r in _rules() if r["alert"] == "GptoolsRetryHorizonNear"]
    window, margin = re.fullmatch(
        r"max by \(job\) \(gptools_webhook_oldest_unacknowledged_seconds\)"
        r" > \((\d+) - (\d+)\) \* 86400",
        rule["expr"],
    ).groups()  # type: ignore[union-attr]
    assert int(window) * 86400 == spec.WEBHOOK_RETRY_WINDOW.total_seconds()
    # Days left for the provider's last retries, hours apart (its back-off's cap).
    assert int(margin) * 86400 >= 4 * spec.WEBHOOK_RETRY_MAX_DELAY.total_seconds()


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_is_a_grafana_dashboard_over_the_job_variable() -> None:
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["title"] and panel["description"] and panel["gridPos"], panel
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            # Every selector of ours is the chosen job's.
            for selector in re.findall(
                r"(?:gptools_webhook_\w+|ALERTS)\{([^}]*)\}", target["expr"]
            ):
                assert 'job=~"$job"' in selector, target["expr"]


def test_every_metric_the_rules_and_the_dashboard_read_is_exported(tmp_path: Path) -> None:
    rules = ALERT_RULES.read_text()
    named = set(re.findall(r"\b(gptools_webhook_[a-z_]+)", rules + " ".join(_dashboard_exprs())))
    assert len(named) >= 6
    receiver = WebhookReceiver(f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        exposition = httpx.get(f"{srv.base_url}/metrics").text
    families = set(re.findall(r"^# TYPE (\S+) ", exposition, re.MULTILINE))
    # A histogram's series are NAME_bucket/_sum/_count, a counter's NAME_total.
    exported = families | {f + "_bucket" for f in families} | {f + "_total" for f in families}
    assert named <= exported, named - exported
    assert 'up{job=~"gptools-webhooks.*"}' in rules  # the jobs of the guide


@pytest.mark.parametrize("shipped", [ALERT_RULES, GRAFANA_DASHBOARD], ids=lambda p: p.name)
def test_the_rules_and_the_dashboard_are_package_data(shipped: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = project["tool"]["setuptools"]["package-data"]
    assert shipped.name in data["gptools.webhooks"]
    assert shipped.parent == ROOT / "gptools" / "webhooks"
