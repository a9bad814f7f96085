"""The base install (issue 14, item 1): a fresh virtual environment with gptools and none of
its extras, at the lock's versions, runs the receiver on SQLite and the participant loader
against the sandbox, has none of the heavy packages, and says in one line which extra a
missing capability needs.

uv makes the environment from its cache in seconds; the first run on a machine downloads
the base packages (about 60 MB) from the package index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.cli import wait_until_ready

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).parent / "uv"
#: What the extras bring and the base must not: [notebooks], [analysis], [postgres], [excel].
NOT_IN_BASE = (
    "jupyterlab",
    "matplotlib",
    "ipywidgets",
    "nbconvert",
    "duckdb",
    "ibis",
    "pyarrow",
    "psycopg",
    "openpyxl",
)
_DEADLINE_S = 120.0

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a fresh venv holding only the base install (editable, so it runs
    this tree's code), pinned by requirements.lock used as constraints."""
    venv = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run(
        [str(UV), "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=300
    )
    subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "-q",
            "--python",
            str(venv / "bin" / "python"),
            "--constraints",
            str(ROOT / "requirements.lock"),
            "-e",
            str(ROOT),
        ],
        check=True,
        timeout=600,
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in ("VIRTUAL_ENV", "PYTHONPATH", "GPTOOLS_SANDBOX_URL", "GP_USERNAME", "GP_PASSWORD")
    }
    env.update(
        {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "GP_BASE_URL": ""}
    )
    yield env


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_base_install_has_no_extra(base_env: dict[str, str], tmp_path: Path) -> None:
    probe = (
        "import importlib.util, json; "
        f"print(json.dumps([m for m in {list(NOT_IN_BASE)!r} "
        "if importlib.util.find_spec(m) is not None]))"
    )
    done = _run(base_env, tmp_path, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the base install has {done.stdout.strip()}"


def test_base_install_receives_webhooks_on_sqlite(base_env: dict[str, str], tmp_path: Path) -> None:
    env = {**base_env, "GP_WEBHOOK_API_KEY": "base-install-key"}
    port = _free_port()
    store = tmp_path / "webhooks.sqlite3"
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        server = subprocess.Popen(
            [
                "gptools",
                "webhooks",
                "serve",
                "--auth",
                "bearer",
                "--store",
                f"sqlite:///{store}",
                "--port",
                str(port),
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        wait_until_ready(server, f"http://127.0.0.1:{port}/readyz", log, timeout=_DEADLINE_S)
        done = _run(
            env,
            tmp_path,
            "gptools",
            "sandbox",
            "deliver",
            "--url",
            f"http://127.0.0.1:{port}/v1/game-action-events",
            "-n",
            "20",
            "--auth",
            "bearer",
            "--json",
        )
        assert done.returncode == 0, done.stderr
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=60)
    with sqlite3.connect(store) as con:
        stored = con.execute("SELECT count(*) FROM webhook_actions").fetchone()[0]
        logged_200 = con.execute("SELECT count(*) FROM delivery_log WHERE status = 200").fetchone()[
            0
        ]
    assert stored == 20
    assert logged_200 >= 20


def test_base_install_loads_participants_into_the_sandbox(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    shutil.copytree(ROOT / "data", tmp_path / "data")
    env = {
        **base_env,
        "GPTOOLS_SANDBOX_STATE_DIR": str(tmp_path / "state"),
        "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals"),
    }
    done = _run(env, tmp_path, "gptools", "campaigns", "apply", "data/example_plan.yaml", "--json")
    assert done.returncode == 0, done.stderr
    done = _run(
        env,
        tmp_path,
        "gptools",
        "participants",
        "load",
        "data/players_messy.csv",
        "--campaign",
        "CMP-000001",
        "--brand",
        "201",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["loaded"], summary["complete"]) == (20, True)


def _one_line_naming(extra: str, stderr: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert f"pip install 'gptools[{extra}]'" in lines[0]


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("webhooks", "analyze", "data/sample_delivery_log.jsonl"), "analysis"),
        (
            (
                "webhooks",
                "export",
                "--store",
                "sqlite:///w.sqlite3",
                "--format",
                "parquet",
                "out.parquet",
            ),
            "analysis",
        ),
        (
            ("webhooks", "serve", "--auth", "none", "--store", "postgresql://u@127.0.0.1/test"),
            "postgres",
        ),
        (("run-notebooks",), "notebooks"),
    ],
)
def test_a_missing_extra_is_one_line_exit_1(
    base_env: dict[str, str], tmp_path: Path, args: tuple[str, ...], extra: str
) -> None:
    shutil.copytree(ROOT / "data", tmp_path / "data")
    (tmp_path / "notebooks").mkdir()
    if "--store" in args and args[args.index("--store") + 1].startswith("sqlite:///"):
        # The store must exist (a missing one is bad input), and the base install makes it.
        store = args[args.index("--store") + 1]
        made = _run(base_env, tmp_path, "gptools", "webhooks", "migrate", "--store", store)
        assert made.returncode == 0, (made.stdout, made.stderr)
    done = _run(base_env, tmp_path, "gptools", *args)
    assert done.returncode == 1, (done.stdout, done.stderr)
    _one_line_naming(extra, done.stderr)


def test_the_python_api_raises_a_gptools_error_naming_the_extra(
    base_env: dict[str, str], tmp_path: Path
) -> None:
    script = """
import gptools
for use in (lambda: gptools.analyze, lambda: gptools.build_ui,
            lambda: gptools.open_store("postgresql://u@127.0.0.1/test")):
    try:
        use()
    except gptools.MissingExtraError as exc:
        assert isinstance(exc, gptools.GptoolsError) and isinstance(exc, ImportError)
        print(exc.extra, "|", exc)
    else:
        raise SystemExit("no error")
"""
    done = _run(base_env, tmp_path, "python", "-c", script)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert [line.split(" | ")[0] for line in lines] == ["analysis", "notebooks", "postgres"]
    for line in lines:
        extra = line.split(" | ")[0]
        assert re.search(rf"pip install 'gptools\[{extra}\]'$", line), line
