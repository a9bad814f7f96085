"""The webhook delivery-log analyser: duplicates, retries, backoff, lost and pending
actions, latency and silent periods, from any delivery log (JSONL, Parquet, SQLite,
PostgreSQL), with charts and a report.

Metrics are defined once as Ibis expressions (:mod:`._metrics`) and run by DuckDB, out of
core. Typical use::

    from gptools.deliverylog import analyze, plot_retry_gaps
    with analyze("data/sample_delivery_log.jsonl") as analysis:
        analysis.report            # headline numbers and warnings (HTML in a notebook)
        analysis.lost_actions()    # what to ask the provider to replay
        plot_retry_gaps(analysis)  # the observed gaps and the fitted backoff
"""

from gptools.errors import require_extra as _require_extra

# Before the modules below import DuckDB, Ibis and pyarrow: one line naming the extra.
_require_extra("analysis", "The delivery-log analyser")

from gptools.deliverylog._analysis import (  # noqa: E402
    DEFAULT_SILENCE_THRESHOLD,
    LOST_COLUMNS,
    DeliveryAnalysis,
    analyze,
    plain_value,
)
from gptools.deliverylog._charts import (  # noqa: E402
    plot_attempts_per_action,
    plot_duplicates_and_retries,
    plot_latency,
    plot_retry_gaps,
    plot_status_mix,
)
from gptools.deliverylog._contract import (  # noqa: E402
    LOG_FORMATS,
    ColumnMapping,
    DeliveryLogError,
    LogFormat,
)
from gptools.deliverylog._engines import ENGINES, LogOptions, open_log  # noqa: E402
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES  # noqa: E402
from gptools.deliverylog._readers import DeliveryLog, read_delivery_log  # noqa: E402
from gptools.deliverylog._report import DeliveryReport  # noqa: E402
from gptools.deliverylog._results import (  # noqa: E402
    CampaignReport,
    CampaignResults,
    CampaignTerms,
    campaign_results,
)
from gptools.deliverylog._results_charts import (  # noqa: E402
    plot_budget_used,
    plot_funnel,
    plot_uptake,
)
from gptools.deliverylog._uplift import (  # noqa: E402
    CampaignUplift,
    MetricUplift,
    UpliftReport,
    holdout_uplift,
)
from gptools.deliverylog._uplift_charts import plot_roi, plot_uplift  # noqa: E402

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_SILENCE_THRESHOLD",
    "ENGINES",
    "LOG_FORMATS",
    "LOST_COLUMNS",
    "CampaignReport",
    "CampaignResults",
    "CampaignTerms",
    "CampaignUplift",
    "ColumnMapping",
    "DeliveryAnalysis",
    "DeliveryLog",
    "DeliveryLogError",
    "DeliveryReport",
    "LogFormat",
    "LogOptions",
    "MetricUplift",
    "UpliftReport",
    "analyze",
    "campaign_results",
    "holdout_uplift",
    "open_log",
    "plain_value",
    "plot_attempts_per_action",
    "plot_budget_used",
    "plot_duplicates_and_retries",
    "plot_funnel",
    "plot_latency",
    "plot_retry_gaps",
    "plot_roi",
    "plot_status_mix",
    "plot_uplift",
    "plot_uptake",
    "read_delivery_log",
]
