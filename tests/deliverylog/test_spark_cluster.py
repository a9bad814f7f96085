"""The analysis on a real Spark cluster, not local mode (issue 25): a standalone master and
one worker started from the PySpark distribution on 127.0.0.1, the CLI's
``--spark-master spark://...`` pointed at them, and its report equal to DuckDB's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.cli import run_gptools
from tests.deliverylog.conftest import random_log, write_records
from tests.deliverylog.test_engines import _close

START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(tmp / "local"),
        SPARK_WORKER_DIR=str(tmp / "work"),
        SPARK_LOG_DIR=str(tmp / "logs"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


def _workers(ui_port: int) -> int:
    """How many workers the master counts as alive (its status page, as JSON)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
            doc = json.loads(r.read())
    except OSError:
        return -1
    return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[str]:
    """A standalone master and one worker (one core, 1 GB) on loopback; its URL."""
    env = _env(tmp_path)
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    spark_class = str(_spark_class())
    logs = []
    procs = []
    for name, args in (
        ("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(ui)]),
        ("worker", ["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                    "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                    "--webui-port", str(worker_ui)]),
    ):  # fmt: skip
        log = (tmp_path / f"{name}.log").open("wb")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while _workers(ui) < 1:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail(
                    "the standalone cluster did not come up: "
                    + (tmp_path / "master.log").read_text()[-2000:]
                    + (tmp_path / "worker.log").read_text()[-2000:]
                )
            time.sleep(0.5)  # polling a status page, not synchronising on a guess
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            with_group = os.getpgid(p.pid) if p.poll() is None else None
            if with_group is not None:
                os.killpg(with_group, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()


def _report(path: Path, env: dict[str, str], *engine: str) -> dict[str, object]:
    done = run_gptools("webhooks", "analyze", str(path), "--json", *engine, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


@pytest.mark.slow
# The suite's 300 s hang guard is too short for a master, a worker and two JVM analyses on
# a loaded 2-core machine (seen at 300 s under load 17); the command's own limit is 600 s.
@pytest.mark.timeout(900)
@pytest.mark.over_time_limit("a standalone master, a worker and two JVM analyses")
def test_analysis_on_a_standalone_cluster_equals_duckdb(cluster: str, tmp_path: Path) -> None:
    builder = random_log(seed=25, n_actions=150)
    path = write_records(tmp_path / "log.jsonl", builder.records)
    env = _env(tmp_path)
    on_cluster = _report(path, env, "--engine", "spark", "--spark-master", cluster)
    on_duckdb = _report(path, env)
    assert on_cluster["deliveries"] == builder.truth.deliveries
    _close(on_cluster, on_duckdb, "report")
