"""The CLI command and the charts, on a generated log."""

from __future__ import annotations

import inspect
import itertools
import json
from pathlib import Path

import matplotlib
import pytest
from click.testing import CliRunner
from matplotlib.figure import Figure

import gptools.cli._analyze  # noqa: F401  (registers the command until the CLI imports it)
from gptools import deliverylog as wa
from gptools.cli import cli
from tests.deliverylog.conftest import LogBuilder, random_log

matplotlib.use("Agg")

SAMPLE_LOG = Path(__file__).resolve().parents[2] / "data" / "sample_delivery_log.jsonl"


@pytest.fixture(scope="module")
def builder() -> LogBuilder:
    return random_log(11, n_actions=150)


@pytest.fixture(scope="module")
def log_path(builder: LogBuilder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return builder.write_jsonl(tmp_path_factory.mktemp("cli") / "log.jsonl")


def test_analyze_json(builder: LogBuilder, log_path: Path) -> None:
    result = CliRunner().invoke(cli, ["webhooks", "analyze", str(log_path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    t = builder.truth
    assert (doc["deliveries"], doc["retries"], doc["duplicate_deliveries"]) == (
        t.deliveries,
        t.retries,
        t.duplicates,
    )
    assert (doc["lost_actions"], doc["pending_actions"]) == (t.lost, t.pending)
    assert doc["check"]["holds"] is True


def test_analyze_human_and_now(log_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["webhooks", "analyze", str(log_path), "--now", "2030-01-01T00:00:00Z"]
    )
    assert result.exit_code == 0, result.output
    assert "Lost actions" in result.stdout and "past their 7-day retry window" in result.stdout


@pytest.mark.parametrize(
    "args",
    [["missing.jsonl"], ["x.txt"], ["{log}", "--now", "soon"], ["{log}", "--format", "csv"]],
)
def test_bad_input_exits_2(log_path: Path, args: list[str]) -> None:
    argv = [a.replace("{log}", str(log_path)) for a in args]
    result = CliRunner().invoke(cli, ["webhooks", "analyze", *argv])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "plot",
    [wa.plot_duplicates_and_retries, wa.plot_status_mix, wa.plot_retry_gaps,
     wa.plot_attempts_per_action, wa.plot_latency],
)  # fmt: skip
def test_charts_return_figures(log_path: Path, tmp_path: Path, plot: object) -> None:
    with wa.analyze(log_path) as analysis:
        fig = plot(analysis)  # type: ignore[operator]
        assert isinstance(fig, Figure) and fig.axes[0].get_title()
        fig.savefig(tmp_path / "chart.png")
        matplotlib.pyplot.close(fig)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with wa.analyze(empty) as analysis:
        fig = plot(analysis)  # type: ignore[operator]
        assert "no " in fig.axes[0].texts[0].get_text()
        matplotlib.pyplot.close(fig)


@pytest.mark.parametrize(
    "plot",
    [wa.plot_duplicates_and_retries, wa.plot_status_mix, wa.plot_retry_gaps, wa.plot_latency],
)  # fmt: skip
def test_legends_never_cover_the_data(log_path: Path, plot: object) -> None:
    with wa.analyze(log_path) as analysis:
        fig = plot(analysis)  # type: ignore[operator]
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend is not None
    fig.canvas.draw()
    box, area = legend.get_window_extent(), ax.get_window_extent()
    # Outside the plot area (where every bar, line and marker is), and on the figure.
    assert not box.overlaps(area), (box, area)
    assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)
    matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("plot", [wa.plot_duplicates_and_retries, wa.plot_status_mix])
def test_hour_labels_of_a_week_do_not_run_into_each_other(plot: object) -> None:
    with wa.analyze(SAMPLE_LOG) as analysis:
        fig = plot(analysis)  # type: ignore[operator]
    fig.canvas.draw()
    labels = [t for t in fig.axes[0].xaxis.get_ticklabels() if t.get_text()]
    boxes = [t.get_window_extent() for t in labels]
    assert len(boxes) >= 3
    # At least about a character of space between neighbours, or they read as one word.
    gaps = [b.x0 - a.x1 for a, b in itertools.pairwise(boxes)]
    assert min(gaps) >= 6, [t.get_text() for t in labels]
    matplotlib.pyplot.close(fig)


def test_public_names() -> None:
    """Every public class and function is exported and documented."""
    for name in wa.__all__:
        obj = getattr(wa, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__, name
    assert {"analyze", "DeliveryAnalysis", "DeliveryReport", "ColumnMapping"} <= set(wa.__all__)


def test_a_missing_spark_extra_is_one_line_exit_1(log_path: Path) -> None:
    """Without PySpark, ``--engine spark`` ends like every other missing extra: exit 1 and
    one line naming ``[spark]`` (PySpark hidden from a fresh interpreter)."""
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['pyspark'] = None\n"
        "from gptools.cli import main\n"
        f"sys.argv = ['gptools', 'webhooks', 'analyze', {str(log_path)!r}, '--engine', 'spark']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'gptools[spark]'" in lines[0], done.stderr
