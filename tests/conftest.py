"""Shared fixtures: one sandbox per test session, reset before each test that asks for it.

``sandbox`` is a :class:`gptools.sandbox.RunningSandbox` with every rate tier enforced;
use ``fresh_sandbox`` instead when a test must not see state left by earlier tests
(it is the same server, reset: no requests, campaigns, faults or rate windows).

The suite runs spread over processes (pytest-xdist, ``make unit``; docs/testing.md, "Suite
time"). Every Spark test shares one JVM: the session-scoped ``spark`` fixture, and the
``xdist_group`` that sends every test using Spark (the fixture, a ``spark`` parameter, or the
``spark`` mark) to one worker. A test over :data:`TEST_TIME_LIMIT_S` fails unless marked
``over_time_limit``.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox

#: The longest a test's own run (its call, not its fixtures' set-up) may take, in seconds,
#: on a machine not busier than its cores (issue 36: "no test over 30 s"). On a busier one
#: the limit grows with the load (:func:`time_limit_s`): a test slowed by other work is not
#: a slow test. GPTOOLS_TEST_TIME_LIMIT_S overrides it. A test that must take longer says
#: why with ``@pytest.mark.over_time_limit("reason")``.
TEST_TIME_LIMIT_S = float(os.environ.get("GPTOOLS_TEST_TIME_LIMIT_S", "30"))
#: Whether a test over the limit fails (GPTOOLS_TEST_TIME_LIMIT=enforce) or is listed at the
#: end of the run (the default until the tests over it today are made faster: failing them
#: now would fail the suite on tests that are correct, only slow; docs/testing.md lists them).
ENFORCE_TIME_LIMIT = os.environ.get("GPTOOLS_TEST_TIME_LIMIT", "list") == "enforce"
#: The tests over the limit in this run and their durations (the listing mode), gathered
#: where the terminal reports (the xdist controller) for its summary.
_OVER_TIME_LIMIT: dict[str, float] = {}


def time_limit_s() -> float:
    """:data:`TEST_TIME_LIMIT_S` times the machine's load per core over the last minute,
    when that is over 1."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return TEST_TIME_LIMIT_S * max(1.0, per_core)


#: The pytest-xdist group of every test that uses Spark: they all run on one worker, in one
#: JVM (``--dist loadgroup``).
SPARK_GROUP = "spark"
#: The hang guard of a Spark test (pytest-timeout's, unless the test sets its own). The
#: suite's 300 s interrupts a py4j call mid-answer, which leaves the shared session's
#: connection out of step: every later Spark test of the run failed with it (seen: one
#: compile-heavy test at 337 s on a loaded machine took 20 others down).
SPARK_HANG_GUARD_S = 900


def _uses_spark(item: pytest.Item) -> bool:
    """Whether a test runs Spark in this process: it asks for the ``spark`` fixture, is
    parametrized with the value ``"spark"`` (an engine), or is marked ``spark``."""
    if item.get_closest_marker("spark") is not None:
        return True
    if "spark" in getattr(item, "fixturenames", ()):
        return True
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return any(isinstance(value, str) and value == "spark" for value in params)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """Put every Spark test in the one xdist group (before xdist reads the groups) with
    its own hang guard (:data:`SPARK_HANG_GUARD_S`), then make sure xdist's grouping took
    (:func:`_name_groups`)."""
    for item in items:
        if _uses_spark(item):
            item.add_marker(pytest.mark.xdist_group(SPARK_GROUP))
            # Appended: a test's own timeout mark stays the closest, and wins.
            item.add_marker(pytest.mark.timeout(SPARK_HANG_GUARD_S))
    yield
    _name_groups(config, items)


def _name_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """What ``--dist loadgroup`` does on a worker, redone where it did not take: xdist 3.8
    names a grouped test ``<nodeid>@<group>`` by writing ``item._nodeid``, which pytest 9.2
    no longer reads (its node ids are structured), so every group was silently spread over
    the workers (pytest-xdist issue 1386). A no-op once xdist's own renaming works."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
        )
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
            item._id = coerce_node_id(item.nodeid + suffix)


def _spark_running() -> bool:
    """Whether this process has a Spark context (a JVM), without importing PySpark."""
    for name in ("pyspark.core.context", "pyspark.context"):  # PySpark 4, then 3
        module = sys.modules.get(name)
        if module is not None and getattr(module, "SparkContext", None) is not None:
            return module.SparkContext._active_spark_context is not None
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    """A test that starts Spark without being in the Spark group fails: under xdist it
    would start a second JVM on another worker."""
    before = _spark_running()
    yield
    if not before and _spark_running() and not _uses_spark(item):
        pytest.fail(
            "this test started Spark without the `spark` fixture or mark: it would start a "
            "JVM of its own on another worker; ask for the `spark` fixture",
            pytrace=False,
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """A passing test whose own run took over :data:`TEST_TIME_LIMIT_S` is reported failed
    (:data:`ENFORCE_TIME_LIMIT`) or listed at the end of the run, unless marked
    ``over_time_limit``: the suite's time stays visible and bounded (docs/testing.md)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if (
        report.when != "call"
        or not report.passed
        or report.duration <= TEST_TIME_LIMIT_S
        or item.get_closest_marker("over_time_limit") is not None
    ):
        return
    limit = time_limit_s()
    if report.duration > limit and not ENFORCE_TIME_LIMIT:
        report.user_properties.append(("over_time_limit", report.duration))
    elif report.duration > limit:
        report.outcome = "failed"
        report.longrepr = (
            f"took {report.duration:.1f} s, over the suite's per-test limit of {limit:.3g} s "
            f"({TEST_TIME_LIMIT_S:g} s, more on a loaded machine; tests/conftest.py): make it "
            "faster (smaller data where size is not the point, a shared fixture, no waits) or "
            "mark it @pytest.mark.over_time_limit('why')"
        )


#: The delivery log shipped in data/ (its first lines warm up the Spark session).
SAMPLE_LOG = Path(__file__).resolve().parents[1] / "data" / "sample_delivery_log.jsonl"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The one local Spark session (2 cores) of the whole run: starting the JVM costs up to
    a minute on a busy machine, so every Spark test shares it (and runs on one xdist
    worker, see :data:`SPARK_GROUP`). It comes warmed up: a new JVM's first analysis
    costs some 25 s more than the next ones (classes loaded, code compiled), paid here
    once, in the set-up, instead of by whichever Spark test runs first."""
    from gptools.deliverylog import analyze
    from gptools.deliverylog._readers_spark import spark_session

    session = spark_session("local[2]")
    log = tmp_path_factory.mktemp("spark-warm-up") / "log.jsonl"
    with SAMPLE_LOG.open(encoding="utf-8") as lines:
        log.write_text("".join(next(lines) for _ in range(50)) + "not json\n", encoding="utf-8")
    with analyze(log, engine="spark", spark=session) as analysis:
        assert analysis.report.actions == 50
        assert list(analysis.malformed_lines().line) == [51]
        analysis.attempts_per_action()
        analysis.per_hour()
    return session


@pytest.fixture(autouse=True)
def _sandbox_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI commands run by a test keep their embedded sandbox's state in a directory of
    that test, never in the user's cache."""
    monkeypatch.setenv("GPTOOLS_SANDBOX_STATE_DIR", str(tmp_path_factory.mktemp("sandbox-state")))
    # The campaign register too (apply_plan and every load record themselves there), and
    # the loader's default journals.
    monkeypatch.setenv("GPTOOLS_REGISTER", str(tmp_path_factory.mktemp("register") / "r.sqlite"))
    # And the receiver's outage spools of PostgreSQL stores (~/.local/state otherwise).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path_factory.mktemp("journals")))


@pytest.fixture(scope="session")
def sandbox() -> Iterator[RunningSandbox]:
    """A sandbox served on 127.0.0.1 for the whole session (rate limits enforced)."""
    with run_sandbox(SandboxConfig(seed=0)) as sb:
        yield sb


@pytest.fixture
def fresh_sandbox(sandbox: RunningSandbox) -> RunningSandbox:
    """The session sandbox, reset so the test starts from nothing."""
    sandbox.reset()
    return sandbox


@pytest.fixture
def cli_runner(fresh_sandbox: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A click runner whose environment points the CLI at the fresh sandbox as ``partner``."""
    acct = fresh_sandbox.accounts["partner"]
    monkeypatch.setenv("GP_BASE_URL", fresh_sandbox.base_url)
    monkeypatch.setenv("GP_USERNAME", acct.username)
    monkeypatch.setenv("GP_PASSWORD", acct.password)
    return CliRunner()


#: How long a command may take to give up on an address that refuses every connection,
#: with the default retry budget (issue 13: "by default under 10 s").
CONNECT_FAILURE_BUDGET_S = 10.0


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def unreachable(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Sequence[str]], Result]:
    """``run(args)``: the CLI invoked with GP_BASE_URL at a closed loopback port; checks the
    contract of a wrong address (issue 13 item 5) and returns the result: exit 1 within the
    retry budget, one line on stderr naming the address, no advice to resume."""
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("GP_BASE_URL", url)
    monkeypatch.setenv("GP_USERNAME", "someone")
    monkeypatch.setenv("GP_PASSWORD", "secret-x")
    for var in ("GP_MAX_RETRIES", "GP_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path_factory.mktemp("journals")))

    def run(args: Sequence[str]) -> Result:
        from gptools.cli import cli

        # The budget is the retry budget: the commands' lazy imports (pandas, ...) take
        # seconds of their own on a busy machine, so they are done before the clock starts.
        for module in (
            "gptools.campaigns",
            "gptools.costs",
            "gptools.participants",
            "gptools.session",
        ):
            importlib.import_module(module)
        started = time.monotonic()
        result = CliRunner().invoke(cli, list(args))
        elapsed = time.monotonic() - started
        assert result.exit_code == 1, result.output
        # The progress bar (when shown) may precede it; the message is one line, the last.
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines[-1] == f"Error: cannot connect to {url}: connection refused", lines
        assert sum("Error" in line for line in lines) == 1, lines
        assert "resume" not in result.output
        assert elapsed < CONNECT_FAILURE_BUDGET_S
        return result

    return run


def pytest_report_teststatus(report: pytest.TestReport) -> None:
    """Gather (on the controller too, under xdist) the tests listed over the limit."""
    # A collection report (or a crashed worker's) has no user properties.
    for name, duration in getattr(report, "user_properties", ()):
        if name == "over_time_limit":
            _OVER_TIME_LIMIT[report.nodeid] = float(str(duration))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """List the tests over the per-test limit (the listing mode of the limit)."""
    if _OVER_TIME_LIMIT:
        terminalreporter.section(
            f"{len(_OVER_TIME_LIMIT)} tests over the per-test limit of {TEST_TIME_LIMIT_S:g} s"
        )
        for nodeid, duration in sorted(_OVER_TIME_LIMIT.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{duration:7.1f} s  {nodeid}")
