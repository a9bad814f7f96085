"""The receiver's one configuration object, :class:`ReceiverConfig`: every setting reaches
the receiver (from Python, and from ``gptools webhooks serve`` through the workers'
hand-over, read back from each worker's ``worker_ready`` line), the hand-over is exact,
and a setting that cannot work is refused once, naming it (the CLI: its option, exit 2).
"""

from __future__ import annotations

import json
import time
from dataclasses import fields
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.webhooks import (
    ReceiverAuth,
    ReceiverConfig,
    ServerLimits,
    SettingError,
    WebhookReceiver,
)
from gptools.webhooks._config import ENV_CONFIG
from tests.webhooks.conftest import READY_TIMEOUT_S, start_receiver_process


def _every_field_changed(tmp_path: Path) -> ReceiverConfig:
    """A configuration whose every setting differs from its default."""
    return ReceiverConfig(
        store=f"sqlite:///{tmp_path / 'other.sqlite3'}",
        auth="basic",
        credentials_file=str(tmp_path / "credentials"),
        handler="some.module:handle",
        path="/hooks/in",
        max_body_bytes=4096,
        metrics_public=False,
        ack_timeout=timedelta(microseconds=650_001),
        max_batch=64,
        purge_every=timedelta(minutes=2),
        refused_rows_per_second=7,
        refusal_summary_every=timedelta(seconds=3.5),
        quiet_alert_after=timedelta(minutes=15),
        spool_dir=str(tmp_path / "spool"),
        spool_max_rows=500,
        spool_max_bytes=1 << 20,
        outage_replay_every=timedelta(seconds=2),
        outage_refresh_every=timedelta(seconds=20),
        queue_max_attempts=3,
        queue_first_delay=timedelta(seconds=0.5),
        queue_factor=3.0,
        queue_max_delay=timedelta(seconds=90),
        queue_lease=timedelta(minutes=4),
        queue_handler_timeout=timedelta(seconds=30),
        queue_max_hung=4,
        queue_batch=16,
        queue_idle_wait=timedelta(seconds=0.25),
        first_seen_refuse="event_type,field",
        first_seen_max_values=50,
        forward="crm=https://crm.example/in risk=nats://127.0.0.1:4222?subject=gp.events",
        forward_max_attempts=4,
        forward_first_delay=timedelta(seconds=0.25),
        forward_max_delay=timedelta(seconds=30),
        forward_lease=timedelta(seconds=45),
        forward_timeout=timedelta(seconds=5),
        limits=ServerLimits(max_connections=200, header_timeout_s=2.5),
    )


def test_the_hand_over_to_the_workers_is_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _every_field_changed(tmp_path)
    # Every setting is changed, so a setting the hand-over dropped would come back as its
    # default and differ.
    defaults = ReceiverConfig()
    assert [
        f.name for f in fields(config) if getattr(config, f.name) == getattr(defaults, f.name)
    ] == []
    assert ReceiverConfig.from_json(config.to_json()) == config
    environment = config.environment()
    assert list(environment) == [ENV_CONFIG]  # one variable, not one per setting
    monkeypatch.setenv(ENV_CONFIG, environment[ENV_CONFIG])
    assert ReceiverConfig.from_environment() == config
    monkeypatch.delenv(ENV_CONFIG)
    assert ReceiverConfig.from_environment() == ReceiverConfig()


def test_every_setting_reaches_the_parts_of_the_receiver(tmp_path: Path) -> None:
    config = _every_field_changed(tmp_path)
    receiver = WebhookReceiver(
        f"sqlite:///{tmp_path / 'store.sqlite3'}",
        auth=ReceiverAuth.none(),
        handler=lambda event: None,
        config=config,
    )
    assert (receiver.path, receiver.max_body_bytes) == ("/hooks/in", 4096)
    assert receiver.metrics_public is False
    assert receiver.ack_timeout == timedelta(microseconds=650_001)
    assert receiver.writer._wait_seconds == 0.650001
    assert receiver.writer.max_batch == 64
    assert receiver.maintenance.every == timedelta(minutes=2)
    assert (receiver.refusals.rate, receiver.refusals.every) == (7, timedelta(seconds=3.5))
    assert receiver.quiet_alert_after == timedelta(minutes=15)
    spool = receiver.outage.spool
    assert (spool.max_rows, spool.max_bytes) == (500, 1 << 20)
    assert spool.directory.is_relative_to(tmp_path / "spool")
    outage = receiver.outage
    assert (outage.replay_every, outage.refresh_every) == (
        timedelta(seconds=2),
        timedelta(seconds=20),
    )
    queue = receiver.processing
    assert queue is not None
    assert (queue.max_attempts, queue.factor, queue.max_hung, queue.batch) == (3, 3.0, 4, 16)
    assert (queue.first_delay, queue.max_delay, queue.lease, queue.handler_timeout) == (
        timedelta(seconds=0.5),
        timedelta(seconds=90),
        timedelta(minutes=4),
        timedelta(seconds=30),
    )
    assert queue.idle_wait == timedelta(seconds=0.25)
    watch = receiver.first_seen
    assert (watch.refuse, watch.max_values) == (frozenset({"event_type", "field"}), 50)
    forwarder = receiver.forwarder
    assert forwarder is not None
    assert [(d.name, d.kind) for d in forwarder.destinations] == [("crm", "http"), ("risk", "nats")]
    assert forwarder.max_attempts == 4
    assert (forwarder.first_delay, forwarder.max_delay, forwarder.lease, forwarder.timeout) == (
        timedelta(seconds=0.25),
        timedelta(seconds=30),
        timedelta(seconds=45),
        timedelta(seconds=5),
    )


def test_keywords_change_the_configuration_given(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    receiver = WebhookReceiver(
        store,
        auth=ReceiverAuth.none(),
        config=ReceiverConfig(max_batch=64, path="/a"),
        path="/b",
        queue_options={"lease": timedelta(minutes=9)},
        outage_options={"replay_every": timedelta(seconds=3)},
    )
    assert receiver.config == ReceiverConfig(
        store=store,
        max_batch=64,
        path="/b",
        queue_lease=timedelta(minutes=9),
        outage_replay_every=timedelta(seconds=3),
    )
    with pytest.raises(TypeError, match="no receiver setting named acktimeout"):
        WebhookReceiver(store, auth=ReceiverAuth.none(), acktimeout=1)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("ack_timeout", timedelta(0), "ack_timeout must be above 0, got 0:00:00"),
        ("max_batch", 0, "max_batch must be at least 1, got 0"),
        ("purge_every", timedelta(seconds=-1), "purge_every must be above 0"),
        (
            "queue_handler_timeout",
            timedelta(minutes=5),
            "queue_handler_timeout 0:05:00 must be shorter than the lease 0:05:00",
        ),
        ("queue_factor", 0.5, "queue_factor must be at least 1 and finite, got 0.5"),
        ("queue_max_delay", timedelta(0), "queue_max_delay must be at least queue_first_delay"),
        ("spool_max_rows", -1, "spool_max_rows must be at least 0, got -1"),
        ("auth", "digest", "auth must be bearer, basic or none, got 'digest'"),
        ("store", "mysql://db/x", "store is not a store URL: unknown store URL scheme 'mysql'"),
        ("handler", "no-colon", "handler 'no-colon' must look like package.module:function"),
        ("ack_timeout", 0.8, "ack_timeout must be timedelta, got 0.8"),
        ("metrics_public", 1, "metrics_public must be bool, got 1"),
        ("spool_dir", 3, "spool_dir must be str or None, got 3"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_by_name(
    setting: str, value: Any, message: str
) -> None:
    with pytest.raises(SettingError) as refused:
        ReceiverConfig(**{setting: value})
    assert refused.value.setting == setting
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(
    ("name", "value", "refused"),
    [
        ("header_timeout_s", 0.1, False),
        ("header_timeout_s", 0.0999, True),
        ("body_timeout_s", 86400.0, False),
        ("body_timeout_s", 86400.001, True),
        ("keep_alive_timeout_s", float("nan"), True),
        ("keep_alive_timeout_s", float("inf"), True),
        ("max_header_bytes", 1, False),
        ("max_header_bytes", 0, True),
        ("max_header_fields", 0, True),
        ("max_connections", 0, True),
    ],
)
def test_the_server_limits_are_bounded(name: str, value: float, refused: bool) -> None:
    """A connection time-out of NaN or infinity would let a slow stranger hold a
    connection for good: each limit has its range, its ends included."""
    limits = ServerLimits(**{name: value})
    if not refused:
        assert getattr(ReceiverConfig(limits=limits).limits, name) == value
        return
    with pytest.raises(SettingError) as caught:
        ReceiverConfig(limits=limits)
    assert caught.value.setting == f"limits.{name}"
    shown = "between 0.1 and 86400 seconds" if name.endswith("_s") else "at least 1"
    assert str(caught.value) == f"limits.{name} must be {shown}, got {value}"


@pytest.mark.parametrize(
    ("option", "value", "shown"),
    [
        ("--header-timeout", "nan", "nan is not in the range 0.1<=x<=86400"),
        ("--body-timeout", "inf", "inf is not in the range 0.1<=x<=86400"),
        ("--keep-alive-timeout", "86400.5", "86400.5 is not in the range 0.1<=x<=86400"),
        ("--ack-timeout", "0", "ack_timeout must be above 0"),
        ("--ack-timeout", "nan", "nan is not a finite number"),
        ("--batch-size", "0", "max_batch must be at least 1"),
        ("--purge-interval", "-5", "purge_every must be above 0"),
        ("--queue-handler-timeout", "300", "must be shorter than the lease"),
        ("--queue-factor", "inf", "inf is not a finite number"),
        ("--spool-max-bytes", "-1", "spool_max_bytes must be at least 0"),
        ("--quiet-alert-after", "0", "quiet_alert_after must be above 0"),
        ("--max-body-bytes", "0", "max_body_bytes must be at least 1"),
        ("--path", "hooks", "path must start with '/'"),
    ],
)
def test_the_cli_refuses_a_bad_setting_naming_its_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, value: str, shown: str
) -> None:
    import gptools.webhooks

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("serve started with a setting that cannot work")

    monkeypatch.setattr(gptools.webhooks, "serve", started)
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    result = CliRunner().invoke(
        cli, ["webhooks", "serve", "--auth", "none", "--store", store, option, value]
    )
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert shown in result.output
    assert not (tmp_path / "store.sqlite3").exists()


#: Each option of a setting, a value other than its default, the setting, and the value
#: the worker logs for it (times in seconds).
OPTIONS = [
    ("--path", "/hooks/in", "path", "/hooks/in"),
    ("--max-body-bytes", "4096", "max_body_bytes", 4096),
    ("--refused-rows-per-second", "7", "refused_rows_per_second", 7),
    ("--refusal-summary-every", "3.5", "refusal_summary_every", 3.5),
    ("--ack-timeout", "0.65", "ack_timeout", 0.65),
    ("--batch-size", "64", "max_batch", 64),
    ("--purge-interval", "120", "purge_every", 120.0),
    ("--quiet-alert-after", "900", "quiet_alert_after", 900.0),
    ("--queue-max-attempts", "3", "queue_max_attempts", 3),
    ("--queue-first-delay", "0.5", "queue_first_delay", 0.5),
    ("--queue-factor", "3", "queue_factor", 3.0),
    ("--queue-max-delay", "90", "queue_max_delay", 90.0),
    ("--queue-lease", "240", "queue_lease", 240.0),
    ("--queue-handler-timeout", "30", "queue_handler_timeout", 30.0),
    ("--queue-max-hung", "4", "queue_max_hung", 4),
    ("--queue-batch", "16", "queue_batch", 16),
    ("--queue-idle-wait", "0.25", "queue_idle_wait", 0.25),
    ("--spool-max-rows", "500", "spool_max_rows", 500),
    ("--spool-max-bytes", "1048576", "spool_max_bytes", 1048576),
    ("--outage-replay-every", "2", "outage_replay_every", 2.0),
    ("--outage-refresh-every", "20", "outage_refresh_every", 20.0),
    ("--first-seen-refuse", "event_type", "first_seen_refuse", "event_type"),
    ("--first-seen-max-values", "50", "first_seen_max_values", 50),
    # The password of a destination is never in a log line.
    (
        "--forward",
        "crm=https://u:pw-9@crm.invalid/in",
        "forward",
        "crm=https://u:***@crm.invalid/in",
    ),
    ("--forward-max-attempts", "4", "forward_max_attempts", 4),
    ("--forward-first-delay", "0.25", "forward_first_delay", 0.25),
    ("--forward-max-delay", "30", "forward_max_delay", 30.0),
    ("--forward-lease", "45", "forward_lease", 45.0),
    ("--forward-timeout", "5", "forward_timeout", 5.0),
]


def test_every_option_reaches_each_worker(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    spool = tmp_path / "spool"
    args = [part for option, value, _, _ in OPTIONS for part in (option, value)]
    args += ["--spool-dir", str(spool), "--max-connections", "200", "--log-format", "json"]
    receiver = start_receiver_process(tmp_path, store, *args, workers=2)
    try:
        lines = _worker_ready_lines(receiver.log, workers=2)
    finally:
        receiver.terminate()
    expected = ReceiverConfig(
        auth="bearer",
        spool_dir=str(spool),
        limits=ServerLimits(max_connections=200),
        **{
            setting: timedelta(seconds=shown)
            if isinstance(getattr(ReceiverConfig(), setting), timedelta)
            else shown
            for _, _, setting, shown in OPTIONS
            if setting != "forward"
        },
        forward="crm=https://u:pw-9@crm.invalid/in",
    ).shown()
    for line in lines:
        settings = line["settings"]
        for option, _, setting, shown in OPTIONS:
            assert (option, settings[setting]) == (option, shown)
        assert settings == expected
    assert len({line["pid"] for line in lines}) == 2  # two processes, one hand-over each


def _worker_ready_lines(log: Path, *, workers: int) -> list[dict[str, Any]]:
    """The ``worker_ready`` lines of ``workers`` workers, once all are in the log (the
    first is there when /healthz answers; the others follow as they start)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        lines = [
            json.loads(text)
            for text in log.read_text().splitlines()
            if text.startswith("{") and '"event":"worker_ready"' in text
        ]
        if len(lines) >= workers or time.monotonic() > deadline:
            assert len(lines) == workers, log.read_text()
            return lines
        time.sleep(0.05)


def test_the_repr_blanks_the_store_password() -> None:
    config = ReceiverConfig(
        store="postgresql://app:s3cret-pw@db.example/receiver",
        forward="rmq=amqp://gp:br0ker-pw@mq.example/%2F?queue=events",
    )
    assert "s3cret-pw" not in repr(config)
    assert "br0ker-pw" not in repr(config) and "br0ker-pw" not in json.dumps(config.shown())
    assert "forward='rmq=amqp://gp:***@mq.example/%2F?queue=events'" in repr(config)
    assert repr(config).startswith(
        "ReceiverConfig(store='postgresql://app:***@db.example/receiver'"
    )
