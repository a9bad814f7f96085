"""Rendered notebooks show their widgets in a browser that has no network.

Headless Chromium (Debian's ``chromium``, installed by ``scripts/ensure-browser``) opens the
page with every network address unreachable and dumps the DOM after the scripts ran.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import subprocess
import tarfile
from pathlib import Path

import nbformat
import pytest

from gptools.notebook_html import (
    _HTML_MANAGER_SCRIPT,
    _OUTPUT_CSS,
    _STATIC_DIR,
    WidgetManagerUnavailable,
    _unpack_widget_manager,
    write_html,
)
from gptools.notebook_runner import run_notebook
from tests._support.tools import installed

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

# No request can leave the browser: every host name fails to resolve and any proxied
# request goes to a closed port. Only file:// pages load.
OFFLINE = ("--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND")


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser's path, installed by the project's own script when missing."""
    return installed("chromium", "ensure-browser")


def offline_dom(browser: str, page: Path, profile: Path) -> str:
    """The page's DOM after its scripts ran, in a fresh profile with no network."""
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *OFFLINE,
            "--virtual-time-budget=20000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_planner_of_notebook_01_renders_offline(chromium: str, tmp_path: Path) -> None:
    run = run_notebook(NOTEBOOKS / "01_plan_campaign.ipynb", tmp_path / "build")
    assert run.ok, run.error
    assert (tmp_path / "build" / _STATIC_DIR / _HTML_MANAGER_SCRIPT).is_file()
    page = run.html.read_text(encoding="utf-8")
    assert "unpkg.com" not in page and "require.min.js" not in page
    dom = offline_dom(chromium, run.html, tmp_path / "profile")
    # Games and currencies are select lists, feature and base-bet level drop-downs.
    assert len(re.findall(r"<select multiple", dom)) >= 2, dom[-3000:]
    assert len(re.findall(r'<div class="[^"]*widget-dropdown[^"]*"', dom)) >= 2
    # The planner's output: the HTML widget holding the table of costs and exposure.
    html_widget = dom.split('class="widget-html-content"', 1)[1]
    assert "<table" in html_widget.split("</div>", 1)[0]
    assert "max_exposure" in html_widget and "golden-pharaoh" in dom


def test_progress_bars_of_notebook_03_render_offline(chromium: str, tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOKS / "03_bulk_participants.ipynb", as_version=4)
    html = write_html(nb, tmp_path / "build", "03_bulk_participants")
    dom = offline_dom(chromium, html, tmp_path / "profile")
    bars = re.findall(r'<div class="[^"]*widget-hprogress[^"]*"', dom)
    assert len(bars) >= 2, dom[-3000:]
    assert re.search(r'class="widget-html-content">loading\sinto\sCMP-000001', dom)


def test_notebook_05_reads_in_a_browser(chromium: str, tmp_path: Path) -> None:
    """The committed outputs of notebook 05 as a reader sees them offline: its three
    charts drawn, the table of players to target again and their list, no warning box, and
    printed lines that wrap between words (nbconvert's lab CSS breaks them anywhere)."""
    nb = nbformat.read(NOTEBOOKS / "05_campaign_results.ipynb", as_version=4)
    html = write_html(nb, tmp_path / "build", "05_campaign_results")
    page = html.read_text(encoding="utf-8")
    # Our rule comes after nbconvert's, so it is the one the browser applies.
    assert page.rindex(_OUTPUT_CSS.strip()) > page.rindex("word-break: break-all")
    dom = offline_dom(chromium, html, tmp_path / "profile")
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == 3, dom[-3000:]
    assert "to_target_again" in dom and "CMP-000002" in dom
    tables = re.findall(r"<table.*?</table>", dom, re.DOTALL)
    last = tables[-1]
    assert "player_id" in last and len(re.findall(r"<tr", last)) == 11  # header + 10 players
    # A receiver without authentication logs a warning, shown as a red stderr box.
    assert "jp-OutputArea-stderr" not in dom and "WITHOUT authentication" not in dom


def test_a_tampered_bundle_is_refused(tmp_path: Path) -> None:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        body = b"alert('not the widget manager')"
        info = tarfile.TarInfo(f"package/dist/{_HTML_MANAGER_SCRIPT}")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    with pytest.raises(WidgetManagerUnavailable, match="integrity"):
        _unpack_widget_manager(data.getvalue(), tmp_path / "bundle")
    assert not (tmp_path / "bundle").exists()


def _tarball(files: dict[str, bytes]) -> tuple[bytes, str]:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    raw = data.getvalue()
    return raw, "sha512-" + base64.b64encode(hashlib.sha512(raw).digest()).decode()


def test_only_the_page_files_are_unpacked_readable_and_once(tmp_path: Path) -> None:
    raw, integrity = _tarball(
        {
            f"package/dist/{_HTML_MANAGER_SCRIPT}": b"// the bundle",
            "package/dist/embed.js.map": b"{}",
            "package/dist/embed-amd.js": b"define()",
            "package/dist/a.woff2": b"font",
            "package/src/index.ts": b"",
            "package/dist/../../escape.js": b"no",
        }
    )
    dest = _unpack_widget_manager(raw, tmp_path / "cache" / "bundle", integrity=integrity)
    assert sorted(p.name for p in dest.iterdir()) == ["a.woff2", _HTML_MANAGER_SCRIPT]
    assert not (tmp_path / "escape.js").exists() and not (tmp_path / "cache" / "escape.js").exists()
    assert dest.stat().st_mode & 0o755 == 0o755  # readable when build/ is served
    # Another build finished first: its complete folder is kept, ours dropped.
    other, other_integrity = _tarball({f"package/dist/{_HTML_MANAGER_SCRIPT}": b"// later"})
    assert _unpack_widget_manager(other, dest, integrity=other_integrity) == dest
    assert (dest / _HTML_MANAGER_SCRIPT).read_bytes() == b"// the bundle"
    assert [p.name for p in dest.parent.iterdir()] == ["bundle"]  # no temporary left


def test_without_bundle_or_network_the_page_falls_back_and_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GPTOOLS_WIDGETS_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "http://127.0.0.1:9")  # nothing listens there
    nb = nbformat.read(NOTEBOOKS / "03_bulk_participants.ipynb", as_version=4)
    html = write_html(nb, tmp_path / "build", "03_bulk_participants")
    assert "unpkg.com/@jupyter-widgets/html-manager" in html.read_text(encoding="utf-8")
    assert not (tmp_path / "build" / "_static").exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "widgets will load from the internet" in err[0]
    assert "cannot download http://127.0.0.1:9/" in err[0]
