"""The smaller things a user meets on the command line (issue 23, item 18)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.cli._params import HTTP_URL, MAX_URL_LENGTH, StoreUrl
from gptools.sandbox import RunningSandbox
from gptools.webhooks import open_store
from tests.test_cli_bad_values import command_at, commands

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "data" / "sample_delivery_log.jsonl"


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    open_store(url).connect().close()
    return url


def _export(store: str, out: Path, *more: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["webhooks", "export", "--store", store, "--format", "jsonl", str(out), *more]
    )
    return result.exit_code, result.output


def test_export_refuses_to_overwrite_without_force(store: str, tmp_path: Path) -> None:
    out = tmp_path / "log.jsonl"
    out.write_text("precious\n")
    code, output = _export(store, out)
    assert code == 2 and "exists; --force overwrites it" in output
    assert out.read_text() == "precious\n"
    code, output = _export(store, out, "--force")
    assert code == 0, output
    assert out.read_text() == ""


def test_export_checks_the_suffix_against_the_format(store: str, tmp_path: Path) -> None:
    code, output = _export(store, tmp_path / "log.parquet")
    assert code == 2 and "does not end in .jsonl" in output
    assert not (tmp_path / "log.parquet").exists()
    assert _export(store, tmp_path / "log.parquet", "--force")[0] == 0


def test_store_help_names_no_default_where_the_option_is_required() -> None:
    for command in ("export", "dead-letters"):
        result = CliRunner().invoke(cli, ["webhooks", command, "--help"])
        text = " ".join(result.output.split())
        assert "--store" in text and "default" not in text.split("--store", 1)[1].split("--")[0]


def test_every_store_option_takes_a_bare_path_the_same_way(tmp_path: Path) -> None:
    stores = [
        (path, p)
        for path in commands(cli)
        for p in command_at(path).params
        if getattr(p, "opts", None) and "--store" in p.opts
    ]
    assert {" ".join(path) for path, _ in stores} >= {
        "webhooks serve",
        "webhooks export",
        "webhooks dead-letters",
    }
    assert all(isinstance(p.type, StoreUrl) for _, p in stores)
    bare = tmp_path / "w1.sqlite3"
    made = CliRunner().invoke(cli, ["webhooks", "migrate", "--store", str(bare), "--json"])
    assert made.exit_code == 0, made.output
    assert bare.exists()
    result = CliRunner().invoke(cli, ["webhooks", "dead-letters", "--store", str(bare), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"dead_letters": [], "retried": 0}


def test_run_notebooks_on_a_folder_without_notebooks_is_bad_input(tmp_path: Path) -> None:
    pytest.importorskip("nbclient")
    result = CliRunner().invoke(cli, ["run-notebooks", "--notebooks", str(tmp_path)])
    assert result.exit_code == 2
    assert "holds no notebooks" in result.stderr


def test_now_before_the_whole_log_is_warned_about() -> None:
    pytest.importorskip("duckdb")
    result = CliRunner().invoke(
        cli, ["webhooks", "analyze", str(LOG), "--now", "2020-01-01T00:00:00Z", "--json"]
    )
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("is before the whole log" in w for w in warnings), warnings
    later = CliRunner().invoke(cli, ["webhooks", "analyze", str(LOG), "--json"])
    assert not any("before the whole log" in w for w in json.loads(later.stdout)["warnings"])


def test_messages_use_cli_words_not_python_names(
    cli_runner: CliRunner,
    fresh_sandbox: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    plan = cli_runner.invoke(cli, ["campaigns", "plan", str(empty), "--offline"])
    assert plan.exit_code == 2
    assert "got an empty document" in plan.stderr and "NoneType" not in plan.stderr

    pytest.importorskip("duckdb")
    analysed = cli_runner.invoke(cli, ["webhooks", "analyze", str(LOG)])
    assert analysed.exit_code == 0
    assert (
        "lost_actions()" not in analysed.output and "--lost-out FILE writes them" in analysed.output
    )
    document = json.loads(
        cli_runner.invoke(cli, ["webhooks", "analyze", str(LOG), "--json"]).stdout
    )
    assert not any("lost_actions()" in w for w in document["warnings"])

    applied = cli_runner.invoke(
        cli,
        [
            "campaigns",
            "apply",
            str(ROOT / "data" / "example_plan.yaml"),
            "--now",
            "2029-12-01T12:00:00Z",
        ],
    )
    assert applied.exit_code == 0, applied.output
    players = tmp_path / "players.csv"
    players.write_text("p-1\n" + "x" * 200 + "\n")
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path / "journals"))
    loaded = cli_runner.invoke(
        cli, ["participants", "load", str(players), "--campaign", "CMP-000001", "--brand", "201"]
    )
    assert loaded.exit_code == 0, loaded.output
    rejects = (tmp_path / "players.rejects.csv").read_text()
    assert "too_long" in rejects and "--max-id-length" in rejects
    assert "max_id_length=" not in rejects
    assert "max_id_length=" not in loaded.output


@pytest.mark.parametrize(
    ("value", "accepted"),
    [
        ("0.1", True),
        ("0.0999", False),
        ("86400", True),
        ("86400.001", False),
        ("nan", False),
        ("inf", False),
    ],
)
def test_a_connection_time_out_is_taken_within_its_range_ends_included(
    value: str, accepted: bool
) -> None:
    """The CLI's range is the receiver configuration's (spec.RECEIVER_TIMEOUT_RANGE)."""
    param = command_at(("webhooks", "serve")).params
    option = next(p for p in param if p.name == "header_timeout")
    if accepted:
        assert option.type.convert(value, option, None) == float(value)
        return
    with pytest.raises(click.BadParameter) as caught:
        option.type.convert(value, option, None)
    assert caught.value.message == f"{value} is not in the range 0.1<=x<=86400"


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        ("http://h", None),
        ("https://127.0.0.1:8000/v1/game-action-events", None),
        ("http://" + "h" * (MAX_URL_LENGTH - 7), None),
        ("http://" + "h" * (MAX_URL_LENGTH - 6), "is longer than 2048 characters"),
        ("ftp://h/x", "is not an http(s) URL with a host"),
        ("http://", "is not an http(s) URL with a host"),
        ("http://[::1/x", "is not an http(s) URL with a host"),
        ("http://h/a b", "holds spaces or control characters"),
        ("http://h/\u202e", "holds spaces or control characters"),
    ],
)
def test_a_url_option_takes_an_http_url_with_a_host(value: str, refusal: str | None) -> None:
    if refusal is None:
        assert HTTP_URL.convert(value, None, None) == value
        return
    with pytest.raises(click.BadParameter) as caught:
        HTTP_URL.convert(value, None, None)
    shown = value if len(value) <= 80 else f"{value[:60]}..."
    assert caught.value.message == f"{shown!r} {refusal}"
