"""Rendered notebooks that show their widgets with no internet.

nbconvert's page loads the widget manager (``@jupyter-widgets/html-manager``) and require.js
from CDNs, so offline the planner and the progress bars are empty boxes. Here the page embeds
the widget state (nbclient stores it in the notebook) and loads the manager's self-contained
bundle (``dist/embed.js``, which needs no require.js) from ``_static/`` next to the page. The
bundle is the npm registry's tarball of a pinned version, checked against its pinned
integrity and cached under the user's cache directory, so only the first build needs the
network; without it the page falls back to the CDN and says so.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

import httpx
import nbformat
from jinja2 import DictLoader
from nbconvert import HTMLExporter

from gptools.errors import GptoolsError

_HTML_MANAGER_VERSION = "1.0.15"
# npm's ``dist.integrity`` of that version: the tarball is refused if it differs.
_HTML_MANAGER_INTEGRITY = (
    "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//"
    "SABeNz1yp47bCrJ3CQA=="
)
_HTML_MANAGER_SCRIPT = "embed.js"
_DEFAULT_REGISTRY = "https://registry.npmjs.org"
ENV_WIDGETS_DIR = "GPTOOLS_WIDGETS_DIR"
_STATIC_DIR = f"_static/html-manager-{_HTML_MANAGER_VERSION}"

# Only what the page loads: the bundle, its licence and the icon fonts it refers to
# (source maps and the require.js variant are left in the tarball).
_KEEP_SUFFIXES = (".js", ".txt", ".woff", ".woff2", ".ttf", ".eot", ".svg")
_SKIP_NAMES = ("embed-amd.js", "libembed-amd.js")

# The lab template without its require.js tag: embed.js does not need it, and offline a
# CDN script tag only delays the page.
#: CSS after nbconvert's own: JupyterLab breaks an output line at any character
#: (``word-break: break-all``), so a long printed sentence is cut mid-word ("real s|ervice");
#: a reader expects it broken between words, and a long word only where nothing else fits.
_OUTPUT_CSS = """
.jp-OutputArea-output pre { word-break: normal; overflow-wrap: anywhere; }
"""
#: The page of every notebook: nbconvert's lab page with the rule above.
_PAGE_TEMPLATE = (
    "{%- extends 'lab/index.html.j2' -%}\n"
    "{%- block html_head_css -%}{{ super() }}<style>" + _OUTPUT_CSS + "</style>"
    "{%- endblock html_head_css -%}\n"
)
_OFFLINE_TEMPLATE = """{%- extends 'gptools_page.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
"""
_TEMPLATES = {"gptools_page.html.j2": _PAGE_TEMPLATE, "gptools_offline.html.j2": _OFFLINE_TEMPLATE}


class WidgetManagerUnavailable(GptoolsError, RuntimeError):
    """The widget manager's bundle could be neither found in the cache nor downloaded."""


def default_widgets_dir() -> Path:
    """Where the bundle is cached: ``$GPTOOLS_WIDGETS_DIR``, else
    ``$XDG_CACHE_HOME/gptools/widgets``, else ``~/.cache/gptools/widgets``."""
    if os.environ.get(ENV_WIDGETS_DIR):
        return Path(os.environ[ENV_WIDGETS_DIR])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gptools" / "widgets"


def _tarball_url(registry: str | None = None) -> str:
    """The npm registry address of the pinned html-manager tarball (``$NPM_CONFIG_REGISTRY``
    names a mirror, as for npm itself)."""
    base = (registry or os.environ.get("NPM_CONFIG_REGISTRY") or _DEFAULT_REGISTRY).rstrip("/")
    return f"{base}/@jupyter-widgets/html-manager/-/html-manager-{_HTML_MANAGER_VERSION}.tgz"


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode("ascii")


def _unpack_widget_manager(
    tarball: bytes, dest: Path, *, integrity: str = _HTML_MANAGER_INTEGRITY
) -> Path:
    """Check ``tarball`` against ``integrity`` (npm's ``sha512-...``; the pinned one by
    default) and unpack the page's files into
    ``dest`` (renamed into place when complete, so a half-written folder is never used)."""
    if _integrity(tarball) != integrity:
        raise WidgetManagerUnavailable(
            f"html-manager {_HTML_MANAGER_VERSION}: the downloaded tarball does not match its "
            f"pinned integrity"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".html-manager-", dir=dest.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
            for member in tar.getmembers():
                path = PurePosixPath(member.name)
                if (
                    member.isfile()
                    and path.parent == PurePosixPath("package/dist")
                    and path.name.endswith(_KEEP_SUFFIXES)
                    and path.name not in _SKIP_NAMES
                ):
                    source = tar.extractfile(member)
                    assert source is not None  # a regular file always has content
                    (work / path.name).write_bytes(source.read())
        if not (work / _HTML_MANAGER_SCRIPT).is_file():
            raise WidgetManagerUnavailable(
                f"html-manager {_HTML_MANAGER_VERSION}: "
                f"no dist/{_HTML_MANAGER_SCRIPT} in the tarball"
            )
        work.chmod(0o755)  # mkdtemp's 0700 would follow the copy into build/
        try:
            work.rename(dest)
        except OSError:
            # Another build unpacked it first (folders only ever appear complete).
            if not (dest / _HTML_MANAGER_SCRIPT).is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def widget_manager(
    cache_dir: Path | None = None, *, registry: str | None = None, timeout_s: float = 60.0
) -> Path:
    """The folder holding the pinned widget manager's bundle, downloaded on first use.

    Raises :class:`WidgetManagerUnavailable` when it is not cached and cannot be fetched.
    """
    dest = (cache_dir or default_widgets_dir()) / f"html-manager-{_HTML_MANAGER_VERSION}"
    if (dest / _HTML_MANAGER_SCRIPT).is_file():
        return dest
    url = _tarball_url(registry)
    try:
        answer = httpx.get(url, timeout=timeout_s, follow_redirects=True)
        answer.raise_for_status()
    except httpx.HTTPError as exc:
        raise WidgetManagerUnavailable(f"cannot download {url}: {exc}") from None
    return _unpack_widget_manager(answer.content, dest)


def _offline_exporter() -> HTMLExporter:
    """nbconvert's lab page, loading the widget manager from ``_static/`` beside it."""
    return HTMLExporter(
        extra_loaders=[DictLoader(_TEMPLATES)],
        template_file="gptools_offline.html.j2",
        widget_renderer_url=f"{_STATIC_DIR}/{_HTML_MANAGER_SCRIPT}",
    )


def write_html(
    nb: nbformat.NotebookNode, out_dir: Path, name: str, *, widgets_dir: Path | None = None
) -> Path:
    """Render ``nb`` to ``out_dir/<name>.html``; a notebook with widgets gets the widget
    manager copied to ``out_dir/_static/`` so the page shows them with no network.

    Without the bundle (not cached, no network) the page keeps nbconvert's CDN address and
    one line on stderr says the widgets will need the internet.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(
        extra_loaders=[DictLoader(_TEMPLATES)], template_file="gptools_page.html.j2"
    )
    if "widgets" in nb.metadata:
        try:
            bundle = widget_manager(widgets_dir)
        except WidgetManagerUnavailable as exc:
            print(f"{name}: widgets will load from the internet ({exc})", file=sys.stderr)
        else:
            shutil.copytree(bundle, out_dir / _STATIC_DIR, dirs_exist_ok=True)
            exporter = _offline_exporter()
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": name}})
    html = out_dir / f"{name}.html"
    html.write_text(body, encoding="utf-8")
    return html


__all__ = [
    "ENV_WIDGETS_DIR",
    "WidgetManagerUnavailable",
    "default_widgets_dir",
    "widget_manager",
    "write_html",
]
