"""Every command of the README's ``bash`` blocks runs as written, in README order, against
the embedded sandbox (issue 11, item 2; issue 23, item 19): the README cannot drift from
what works. The same holds for each guide of the documentation site (docs/guides/), each
run on its own from a fresh start, as a reader who opens only that guide would.

The commands are read from the README itself and run as a reader's shell would run them,
in a scratch folder holding a copy of ``data/`` (the checkout, for the examples), with its
own sandbox state and journals elsewhere. What the test changes, and why:
- fixed ports (``--port N`` and the same ``:N`` in URLs) become free ports, as other test
  runs share the machine;
- the PostgreSQL schema the examples name (and drop) becomes one of this run's own (dropped
  at the end too), as other runs share the machine's PostgreSQL;
- a server started with ``&`` keeps running for the blocks after it, as in a shell, until a
  ``kill %N`` line stops it (SIGTERM); a server started without ``&`` (a reader runs it in
  another terminal) serves the commands of its block and gets Ctrl-C at the block's end.
  A server is ready when it prints its start-up line; one that exits first fails the test
  (a second receiver on a port in use, exit 3);
- the commands in :data:`EXCLUDED` are not run, each for the reason given there.
At the end the scratch folder must hold what it held at the start: the README says how to
remove what its examples write, and following it leaves nothing behind. The README's
examples then run a second time in the same folder and must print the same campaign loop
(issue 35: a second run of the PostgreSQL block no longer doubles its deliveries, nothing of
the first run is left to change the second's numbers).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDES = ROOT / "docs" / "guides"

#: Commands (by prefix) that are not run, and why.
EXCLUDED: dict[str, str] = {
    "make run": "runs every notebook for minutes; `gptools run-notebooks`, what it calls, is "
    "run by tests/test_run_notebooks.py and the notebooks by `make notebooks`",
    "make test": "is the whole suite, this test included",
}
#: Commands that serve until stopped, and the start-up line each prints when it serves.
SERVERS = {
    "gptools sandbox serve": "gptools sandbox serving at",
    "gptools webhooks serve": "receiving webhooks on",
}
#: The PostgreSQL schema the README's examples use, and how their last block drops it.
README_SCHEMA = "schema=receiver"
README_DROP = "DROP SCHEMA IF EXISTS receiver "
_START_TIMEOUT_S = 120.0
_COMMAND_TIMEOUT_S = 300.0


def bash_blocks(text: str) -> list[list[str]]:
    """The command lines of every ```bash block, in order (continuations joined)."""
    blocks = []
    for body in re.findall(r"^```bash\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        lines: list[str] = []
        for raw in body.replace("\\\n", " ").splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                lines.append(line)
        blocks.append(lines)
    return blocks


#: The guides of the documentation site that show commands (each runs on its own).
GUIDES_WITH_COMMANDS = sorted(
    p for p in GUIDES.glob("*.md") if "```bash" in p.read_text(encoding="utf-8")
)


def _excluded(line: str) -> str | None:
    return next((why for prefix, why in EXCLUDED.items() if line.startswith(prefix)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _with_free_ports(blocks: list[list[str]]) -> list[list[str]]:
    fixed = {
        int(p) for block in blocks for line in block for p in re.findall(r"--port (\d+)", line)
    }
    mapping = {p: _free_port() for p in fixed if p != 0}
    out = []
    for block in blocks:
        lines = []
        for line in block:
            for old, new in mapping.items():
                line = re.sub(rf"(?<=--port ){old}\b|(?<=:){old}\b", str(new), line)
            lines.append(line)
        out.append(lines)
    return out


class Server:
    """A serving command run in the background, its stderr read until it ends."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.command = command
        self.ready_line = next(
            line for prefix, line in SERVERS.items() if command.startswith(prefix)
        )
        self.process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.output: list[str] = []
        self.ready = threading.Event()
        self.ended = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        with self.process.stderr:
            for line in self.process.stderr:
                self.output.append(line)
                if self.ready_line in line:
                    self.ready.set()
        self.ended.set()

    def wait_until_serving(self) -> None:
        """Return once the server printed its start-up line; fail if it ended first."""
        for _ in range(int(_START_TIMEOUT_S * 10)):
            if self.ready.wait(0.1):
                return
            if self.ended.is_set():
                break
        self.stop(signal.SIGKILL)
        pytest.fail(
            f"{self.command!r} did not serve (exit {self.process.returncode}): "
            + "".join(self.output)[-2000:]
        )

    def stop(self, how: signal.Signals = signal.SIGINT) -> None:
        """Stop it as a reader would (Ctrl-C, or ``kill``'s SIGTERM) and wait for the end."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, how)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                pytest.fail(f"{self.command!r} did not stop on {how.name}")
        self._reader.join(timeout=30)


def test_readme_lists_commands_and_reasons() -> None:
    lines = [line for block in bash_blocks(README.read_text(encoding="utf-8")) for line in block]
    gptools = [line for line in lines if line.startswith("gptools ")]
    assert len(gptools) >= 10
    # The sequence the issue names: a campaign created by one command, used by the next.
    apply = next(i for i, line in enumerate(lines) if line.startswith("gptools campaigns apply"))
    load = next(i for i, line in enumerate(lines) if line.startswith("gptools participants load"))
    assert apply < load and "--campaign CMP-000001" in lines[load]
    # Issue 35: the loop from the command line, plan -> apply -> play -> results -> list.
    order = [
        next(i for i, line in enumerate(lines) if line.startswith(prefix))
        for prefix in ("gptools campaigns plan", "gptools campaigns apply",
                       "gptools sandbox play", "gptools campaigns results webhooks",
                       "gptools campaigns list", "gptools campaigns show", "kill %")
    ]  # fmt: skip
    assert order == sorted(order)
    for prefix in EXCLUDED:
        assert any(line.startswith(prefix) for line in lines), f"stale exclusion {prefix!r}"
    assert any(README_SCHEMA in line for line in lines)
    assert any(README_DROP in line for line in lines)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _drop_schema(schema: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect("postgresql://postgres@127.0.0.1/test", autocommit=True) as db:
        db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_blocks(text: str, tmp_path: Path) -> list[tuple[str, str]]:
    """Run every command of ``text``'s bash blocks in order, as described above; return the
    lines run with what each printed on stdout, after checking that the scratch folder
    holds what it held at the start."""
    checkout = tmp_path / "checkout"
    if not checkout.exists():
        shutil.copytree(ROOT / "data", checkout / "data")
    before = _files(checkout)
    schema = f"readme_{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "GP_BASE_URL": "",
        "GPTOOLS_SANDBOX_STATE_DIR": str(tmp_path / "state"),
        "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for name in ("GPTOOLS_SANDBOX_URL", "GP_USERNAME", "GP_PASSWORD"):
        env.pop(name, None)
    ran = []
    jobs: list[Server] = []  # started with &: alive across blocks, as in a shell
    try:
        for block in _with_free_ports(bash_blocks(text)):
            foreground: list[Server] = []
            try:
                for line in block:
                    line = line.replace(README_SCHEMA, f"schema={schema}")
                    line = line.replace(README_DROP, f'DROP SCHEMA IF EXISTS "{schema}" ')
                    if _excluded(line) is not None:
                        continue
                    if line.startswith("export "):
                        for word in shlex.split(line, comments=True)[1:]:
                            name, _, value = word.partition("=")
                            env[name] = value
                        continue
                    if line.startswith("kill %"):
                        for job in shlex.split(line, comments=True)[1:]:
                            jobs[int(job.lstrip("%")) - 1].stop(signal.SIGTERM)
                        ran.append((line, ""))
                        continue
                    if line.startswith(tuple(SERVERS)):
                        words = shlex.split(line, comments=True)
                        background = words[-1] == "&"
                        server = Server(
                            shlex.join(words[:-1] if background else words), checkout, env
                        )
                        (jobs if background else foreground).append(server)
                        server.wait_until_serving()
                        ran.append((line, ""))
                        continue
                    done = subprocess.run(
                        ["bash", "-c", line],
                        cwd=checkout,
                        env=env,
                        capture_output=True,
                        text=True,
                        check=False,
                        timeout=_COMMAND_TIMEOUT_S,
                    )
                    assert done.returncode == 0, (
                        f"README command failed with exit {done.returncode}: {line}\n"
                        f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
                    )
                    assert "Traceback" not in done.stderr, done.stderr
                    ran.append((line, done.stdout))
            finally:
                for server in foreground:
                    server.stop()
    finally:
        for server in jobs:
            server.stop()
        if any(f"schema={schema}" in line for line, _ in ran):
            _drop_schema(schema)
    left = sorted(_files(checkout) - before)
    assert not left, f"the examples, followed to the end, leave {left} behind"
    return ran


#: The commands whose output is the campaign loop's result, compared between two runs.
LOOP = ("gptools sandbox play", "gptools campaigns results", "gptools campaigns list")


def _loop_output(ran: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What the campaign loop printed, its free ports and the sandbox's random state
    identity left out."""

    def same(text: str) -> str:
        return re.sub(r"sandbox:[0-9a-f]+", "sandbox:ID", re.sub(r"127\.0\.0\.1:\d+", "PORT", text))

    return [(same(line), same(out)) for line, out in ran if line.startswith(LOOP)]


def _deliveries(ran: list[tuple[str, str]]) -> int:
    """The deliveries the PostgreSQL receiver's log holds, as its analysis says."""
    out = next(o for line, o in ran if "postgresql://" in line and "analyze" in line)
    count: int = json.loads(out)["deliveries"]
    return count


def test_every_readme_command_runs_in_order_twice_with_the_same_results(tmp_path: Path) -> None:
    readme = README.read_text(encoding="utf-8")
    first = run_blocks(readme, tmp_path)
    lines = [line for line, _ in first]
    assert any(line.startswith("gptools participants load") for line in lines)
    assert any("postgresql://" in line and "analyze" in line for line in lines)
    assert any(line.startswith("gptools webhooks analyze webhooks.sqlite3") for line in lines)
    # The loop's results are not zero, and are what the players played (play's truth).
    played = next(out for line, out in first if line.startswith("gptools sandbox play"))
    results = next(out for line, out in first
                   if line.startswith("gptools campaigns results webhooks.sqlite3"))  # fmt: skip
    truth = re.findall(r"^(CMP-\d+): (\d+) of (\d+) participants played by .*?, (\d+) used "
                       r"every round, (\d+) rounds$", played, re.MULTILINE)  # fmt: skip
    found = re.findall(r"^(CMP-\d+) \w+: reached (\d+)/(\d+), completed (\d+), "
                       r"rounds (\d+)/", results, re.MULTILINE)  # fmt: skip
    assert len(truth) == 3 and found == truth
    assert int(truth[0][1]) > 0 and int(truth[0][4]) > 0
    sample = "gptools campaigns results data/sample_delivery_log"
    late = next(out for line, out in first if line.startswith(sample))
    assert "do not overlap in time" in late and len(late.strip().splitlines()) == 1
    # Run again: what the first run wrote is gone, so the same loop prints the same.
    second = run_blocks(readme, tmp_path)
    assert _loop_output(second) == _loop_output(first)
    assert _deliveries(second) == _deliveries(first) == 100


@pytest.mark.slow
@pytest.mark.parametrize("guide", GUIDES_WITH_COMMANDS, ids=lambda p: p.stem)
def test_every_guide_command_runs_in_order(guide: Path, tmp_path: Path) -> None:
    """Each guide of the documentation site on its own, as a reader follows it."""
    ran = run_blocks(guide.read_text(encoding="utf-8"), tmp_path)
    assert ran and all(not line.startswith("make ") for line, _ in ran)
