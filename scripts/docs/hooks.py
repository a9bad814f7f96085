"""mkdocs hooks: the pages and charts that are generated at build time, so none can drift.

- ``reference/assumptions.md``: the table of assumptions, from ``gptools.spec.ASSUMPTIONS``;
- ``reference/log-events.md``: the receiver's JSON log fields and events, from
  ``gptools/webhooks/_log_events.py``;
- ``img/*.png``: the delivery-log charts of ``data/sample_delivery_log.jsonl`` and the
  feature-cost chart of the embedded sandbox's catalogue, drawn by gptools itself.

The charts are drawn once per process (``mkdocs serve`` rebuilds reuse them). The CLI
reference's tables are tidied after mkdocs-click wrote them (see :func:`on_page_content`).
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_LOG = ROOT / "data" / "sample_delivery_log.jsonl"
#: The delivery-log charts: their path in the site, the analyser's function that draws each.
LOG_CHARTS = {
    "img/duplicates_and_retries.png": "plot_duplicates_and_retries",
    "img/status_mix.png": "plot_status_mix",
    "img/retry_gaps.png": "plot_retry_gaps",
    "img/attempts_per_action.png": "plot_attempts_per_action",
    "img/latency.png": "plot_latency",
}
COST_CHART = "img/cost_chart.png"
ASSUMPTIONS_PAGE = "reference/assumptions.md"
LOG_EVENTS_PAGE = "reference/log-events.md"
#: Every file of the site the hooks write (pages may link to them).
GENERATED = frozenset({*LOG_CHARTS, COST_CHART, ASSUMPTIONS_PAGE, LOG_EVENTS_PAGE})
_charts: dict[str, bytes] = {}
#: Games of the sandbox's catalogue that are offered in every currency of the cost chart.
_CHART_GAMES = ["golden-pharaoh", "neon-fruits", "dragon-pearls", "sweet-cascade"]

_ASSUMPTIONS_TEXT = """# Assumptions

Every value below fills a gap the provider's API document marks "not shown". Each is a
constant in `gptools.spec` with the word "assumed" and its reason, and can be overridden
where the last column says. This page is generated from `gptools.spec.ASSUMPTIONS` when the
site is built; the README carries the same table, kept equal to it by a test. Each rule of
the document, next to the `gptools.spec` name that encodes it, is in
[the provider's API](../provider-api.md).

"""


_LOG_EVENTS_TEXT = """# Log fields and events

`gptools webhooks serve --log-format json` writes every line on stderr, in every process
(serve itself, each worker, the metrics port), as one JSON object: the receiver's lines,
uvicorn's, Python's warnings, an exception that ends a thread or the process, and any line
a library writes to stderr. Filter on `event`, a stable name; `message` is for people and
may change. Lines about a request carry its `request_id` (sent back in the answer's
`X-Request-ID` header) and, when the body names one, its `actionId`. Headers and bodies are
never logged; credentials, URL passwords and the receiver's secrets are blanked. How to
query them in the journal: [Deployment](../guides/operations.md#deployment). This page is
generated from `gptools/webhooks/_log_events.py` when the site is built.

## Fields

"""


def _png(figure: Any) -> bytes:
    import matplotlib.pyplot as plt

    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=80, bbox_inches="tight")
    plt.close(figure)
    return out.getvalue()


def _draw_charts() -> dict[str, bytes]:
    import matplotlib

    matplotlib.use("Agg")
    # Raised inside Ibis and pandas by Ibis's own calls (as in pyproject's pytest filters).
    for message in (
        "The 'future.infer_string' option is deprecated",
        r"fetch_arrow_table\(\) is deprecated",
        r"fetch_record_batch\(\) is deprecated",
    ):
        warnings.filterwarnings("ignore", message=message)
    from gptools import deliverylog as analysis
    from gptools.client import Client
    from gptools.costs import cost_chart, preview
    from gptools.sandbox import SandboxConfig, run_sandbox

    charts: dict[str, bytes] = {}
    with analysis.analyze(SAMPLE_LOG) as result:
        for path, name in LOG_CHARTS.items():
            charts[path] = _png(getattr(analysis, name)(result))
    with run_sandbox(SandboxConfig(seed=0)) as sandbox:
        partner = sandbox.accounts["partner"]
        with Client(
            base_url=sandbox.base_url, username=partner.username, password=partner.password
        ) as client:
            table = preview(client, _CHART_GAMES, ["EUR", "JPY", "KWD"], brand=201)
    charts[COST_CHART] = _png(cost_chart(table))
    return charts


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated page and charts to the site's files."""
    from gptools import spec
    from gptools.webhooks._log_events import log_events_markdown

    files.append(
        File.generated(
            config,
            ASSUMPTIONS_PAGE,
            content=_ASSUMPTIONS_TEXT + spec.assumptions_markdown() + "\n",
        )
    )
    files.append(
        File.generated(config, LOG_EVENTS_PAGE, content=_LOG_EVENTS_TEXT + log_events_markdown())
    )
    if not _charts:
        # The sandbox and the client read these; the site is the same on every machine.
        for name in ("GP_BASE_URL", "GPTOOLS_SANDBOX_URL"):
            os.environ.pop(name, None)
        _charts.update(_draw_charts())
    for path, content in _charts.items():
        files.append(File.generated(config, path, content=content))
    return files


def on_page_content(html: str, page: Page, **kwargs: Any) -> str:
    """Show an option without a default as "–": click 8.3 marks it with a sentinel whose
    repr mkdocs-click prints as it is (``Sentinel.UNSET``)."""
    return html.replace("<code>Sentinel.UNSET</code>", "–")
