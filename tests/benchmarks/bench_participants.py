"""Benchmark of the bulk participant loader against the sandbox on loopback.

The sandbox runs in its own process (``gptools sandbox serve``), with every rate tier of
the API document enforced. In one run:

(a) chunk size 1, so every id is one request: achieved requests per second as a fraction
    of the documented per-user limit for participant additions (130/s), and the count of
    rate-limit responses. Goals: >= 0.95 and 0.
(b) 1,000,000 ids with the default chunking, loaded by a separate process (the loader
    alone) whose peak memory (VmHWM) is read: wall time, ids/s, peak MB. Goals: under
    60 s and under 300 MB. Baselines from the same run: the floor set by the rate limit
    (chunks / 130 per second) and reading + validating + journaling the file with no
    sending at all.

Run: .venv/bin/python tests/benchmarks/bench_participants.py [IDS]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import httpx

from gptools import spec
from gptools.client import Client
from gptools.models import CampaignRequest

IDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
LIMIT = next(t.per_second for t in spec.RATE_TIERS if t.name == "user_participant")
SINGLE_IDS = LIMIT * 10  # about ten seconds of requests at the limit
BRAND = 201
ACCOUNT = ("demo-partner", "partner-demo-pass")

_LOADER = """
import json, sys, time
def own_peak_mb():
    # VmHWM: the high-water RSS of this process's own address space since exec;
    # ru_maxrss would carry over the parent's (Linux keeps it across fork and exec).
    return next(int(l.split()[1]) for l in open("/proc/self/status")
                if l.startswith("VmHWM:")) / 1024
from gptools.client import Client
from gptools.participants import load_participants
from gptools.participants._journal import Identity, Journal
from gptools.participants._sources import open_source
from gptools.participants._validate import check_player_id
path, campaign, journal, mode = sys.argv[1:5]
start = time.monotonic()
if mode == "stage-only":
    src = open_source(path)
    book = Journal.open(journal, Identity("none", campaign, None, src.fingerprint))
    book.stage(src.rows(), check_player_id, chunk_size=1000, settings={})
    book.close()
    out = {}
else:
    with Client(env_file=None) as client:
        out = load_participants(client, campaign, path, brand=int(mode), journal=journal,
                                progress=False).to_dict()
out["wall_s"] = time.monotonic() - start
out["peak_mb"] = own_peak_mb()
print(json.dumps(out))
"""


def serve_sandbox() -> tuple[subprocess.Popen[str], str]:
    """Start ``gptools sandbox serve`` on a free loopback port; return it and its URL."""
    code = "import sys; from gptools.cli import main; main(sys.argv[1:])"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "sandbox", "serve", "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        match = re.search(r"serving at (http://127\.0\.0\.1:\d+)", line)
        if match:
            return proc, match.group(1)
    raise SystemExit(f"the sandbox did not start (exit {proc.wait()})")


def new_campaign(client: Client) -> str:
    request = CampaignRequest(
        type="FREE_ROUNDS",
        name="benchmark",
        bet_number=10,
        game_ids=["golden-pharaoh"],
        bet=Decimal("0.10"),
        currency_code="EUR",
        start_date=datetime(2026, 3, 1),
        end_date=datetime(2026, 3, 8),
        time_zone="Europe/Malta",
    )
    return client.create_campaign(request, brand=BRAND).campaign_id


def steady_rate(base_url: str, campaign: str) -> tuple[float, int]:
    """Requests per second the sandbox received for ``campaign``, averaged over the whole
    1-second windows from the first request (a window can never hold more than the limit,
    so neither can the average), and how many it answered with the rate-limit status."""
    recorded = httpx.get(f"{base_url}/_sandbox/requests", timeout=30).json()
    mine = [r for r in recorded if f"/campaign/{campaign}/participant" in r["path"]]
    times = sorted(datetime.fromisoformat(r["at"]).timestamp() for r in mine)
    window = spec.RATE_LIMIT_WINDOW.total_seconds()
    windows = int((times[-1] - times[0]) // window)
    inside = sum(t < times[0] + windows * window for t in times)
    refused = sum(r["status"] == spec.RATE_LIMIT_STATUS for r in mine)
    return inside / (windows * window), refused


def run_loader(env: dict[str, str], *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _LOADER, *args], env=env, text=True, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the loader failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    from gptools.participants import load_participants

    server, base_url = serve_sandbox()
    env = {
        **os.environ,
        "GP_BASE_URL": base_url,
        "GP_USERNAME": ACCOUNT[0],
        "GP_PASSWORD": ACCOUNT[1],
    }
    try:
        with (
            tempfile.TemporaryDirectory(prefix="gptools-bench-") as tmp,
            Client(base_url, *ACCOUNT, env_file=None) as client,
        ):
            work = Path(tmp)
            # Every load records itself in the campaign register: this run's own.
            env["GPTOOLS_REGISTER"] = str(work / "campaigns.sqlite")
            # (a) one id per request, at the documented limit.
            campaign = new_campaign(client)
            ids = [f"single-{i:06d}" for i in range(SINGLE_IDS)]
            single = load_participants(
                client,
                campaign,
                ids,
                brand=BRAND,
                chunk_size=1,
                journal=work / "single.sqlite",
                progress=False,
                register=work / "campaigns.sqlite",
            )
            assert single.loaded == SINGLE_IDS and single.requests == SINGLE_IDS
            achieved, refused = steady_rate(base_url, campaign)
            ratio = achieved / LIMIT
            rate_limited = single.rate_limited + refused
            print(
                f"(a) chunk size 1: {single.requests} requests in {single.elapsed_s:.2f} s; "
                f"{achieved:.1f} req/s over whole 1 s windows; limit "
                f"{LIMIT}/s; ratio {ratio:.3f}; rate-limited {rate_limited}"
            )

            # (b) a million ids, default chunking, in a process of its own.
            players = work / "players.csv"
            with players.open("w", encoding="utf-8") as fh:
                fh.write("playerId\n")
                for i in range(IDS):
                    fh.write(f"player-{i:08d}\n")
            staged = run_loader(env, str(players), "none", str(work / "stage.sqlite"), "stage-only")
            campaign = new_campaign(client)
            big = run_loader(env, str(players), campaign, str(work / "big.sqlite"), str(BRAND))
            assert big["loaded"] == IDS and big["balanced"], big
            wall = float(big["wall_s"])  # type: ignore[arg-type]
            floor = -(-IDS // spec.PARTICIPANT_MAX_IDS) / LIMIT
            print(
                f"(b) {IDS:,} ids: {wall:.1f} s, {IDS / wall:,.0f} ids/s, peak "
                f"{big['peak_mb']:.0f} MB, {big['requests']} requests, "
                f"{big['rate_limited']} rate-limited"
            )
            print(
                f"    baselines: rate-limit floor {floor:.1f} s; reading + validating + "
                f"journaling alone {staged['wall_s']:.1f} s (peak {staged['peak_mb']:.0f} MB)"
            )
            print(
                f"RESULT limit_ratio={ratio:.3f} rate_limited={rate_limited} "
                f"ids_per_s_1m={IDS / wall:.0f} peak_mb={big['peak_mb']:.0f} "
                f"wall_s_1m={wall:.1f}"
            )
    finally:
        server.terminate()
        server.communicate(timeout=30)


if __name__ == "__main__":
    main()
