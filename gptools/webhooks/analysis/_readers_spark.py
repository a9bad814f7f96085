"""Spark's readers: JSONL and Parquet files (one, a glob, a directory) become the same
normalised table as DuckDB's (:data:`._readers.RAW_COLUMNS`), on a Spark session.

Spark has no JSON type; each line (or Parquet ``body``) is parsed once into a ``VARIANT``
(``try_parse_json``) and every payload field is kept as its canonical, minified JSON text
(``to_json``), which the Spark dialect (:mod:`._dialect_spark`) checks exactly as DuckDB's
checks its JSON values. A line that does not parse to a JSON object is ``malformed_line``;
its true line number comes from numbering the lines of its file (``zipWithIndex``), only
when asked. Local JSONL files pass the checks DuckDB's reader makes
(:func:`._readers.readable_jsonl`); Spark reads a stand-in where Hadoop needs one: a
link named for its codec (Hadoop picks gzip by name), a decompressed copy of a zstd file
(Hadoop's zstd codec needs native libraries), a copy without lines over the limit. Needs
the ``[spark]`` extra (PySpark) and Java 17 or newer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import ibis
import ibis.expr.types as ir

from gptools.errors import import_extra
from gptools.webhooks.analysis import _dialect_spark
from gptools.webhooks.analysis._files import DEFAULT_MAX_LINE_BYTES
from gptools.webhooks.analysis._readers import (
    DEFAULT_MAPPING,
    MALFORMED,
    PAYLOAD_FIELDS,
    ColumnMapping,
    DeliveryLog,
    DeliveryLogError,
    LogFormat,
    Where,
    _latency_scale,
    detect_format,
    readable_jsonl,
    readable_literal,
    refuse_absent_fields,
    resolve_files,
)

#: The Spark master when neither ``spark_master=`` nor ``GP_SPARK_MASTER`` names one.
DEFAULT_SPARK_MASTER = "local[*]"
JAVA_HINT = (
    "Spark could not start Java; install Java 17 or newer "
    "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) and set JAVA_HOME if needed"
)


#: Where the JVM that Spark starts writes its own log (its stderr): start-up notices and
#: warnings would otherwise land in a notebook's output or a command's stderr.
SPARK_LOG = Path(tempfile.gettempdir()) / "gptools-spark.log"


@contextlib.contextmanager
def _jvm_stderr_to(path: Path) -> Iterator[None]:
    """Point this process's stderr (file descriptor 2) at ``path`` while a child starts:
    the JVM inherits it for its lifetime; Python's stderr is restored right after."""
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def spark_session(master: str | None = None) -> Any:
    """The process's Spark session (created on first use) for ``master``, else
    ``GP_SPARK_MASTER``, else ``local[*]``. UTC, no web UI; the JVM's own log goes to
    :data:`SPARK_LOG`."""
    SparkSession = import_extra("pyspark.sql", "spark", "engine='spark'").SparkSession
    master = master or os.environ.get("GP_SPARK_MASTER") or DEFAULT_SPARK_MASTER
    builder = SparkSession.builder
    if master.startswith("local"):
        # Spark's 200 shuffle partitions suit a cluster; on one machine each is a task of
        # its own, and small logs spend most of their time starting them.
        cores = master.removeprefix("local").strip("[]")
        n = os.cpu_count() or 2 if cores in ("", "*") else int(cores.split(",")[0])
        builder = builder.config("spark.sql.shuffle.partitions", str(2 * n))
    try:
        with _jvm_stderr_to(SPARK_LOG):
            session = (
                builder.master(master)
                .appName("gptools-analysis")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.session.timeZone", "UTC")
                .getOrCreate()
            )
    except Exception as exc:
        if "JAVA" in str(exc).upper():
            raise DeliveryLogError(f"{JAVA_HINT} ({str(exc).splitlines()[0]})") from None
        raise
    session.sparkContext.setLogLevel("ERROR")
    return session


@dataclass(slots=True)
class SparkDeliveryLog(DeliveryLog):
    """A delivery log on Spark: the same interface as :class:`DeliveryLog`. Its tables are
    checkpointed temporary views of a session of its own (``newSession()``: the caller's
    session keeps its settings and views), dropped on :meth:`close`."""

    session: Any = None
    _views: list[str] = field(default_factory=list)
    _frames: list[Any] = field(default_factory=list)

    engine = "spark"
    dialect = _dialect_spark

    def execute(self, expr: ir.Expr) -> Any:
        """Run an expression on Spark: a pandas DataFrame (or a scalar)."""
        try:
            return self.con.execute(expr)
        except Exception as exc:
            raise _spark_error(self.source, exc) from None

    def materialise(self, name: str, expr: ir.Table) -> ir.Table:
        """``expr`` computed once into this log's view ``name``: a local checkpoint (kept
        by the executors, memory then disk), so later queries start from its rows instead
        of re-planning the whole chain of expressions that built it."""
        view = f"{name}_{self.tag}"
        try:
            df = self.session.sql(self.con.compile(expr))
            df = df.localCheckpoint(eager=True, storageLevel=_MEMORY_AND_DISK())
            df.createOrReplaceTempView(view)
        except Exception as exc:
            raise _spark_error(self.source, exc) from None
        self._views.append(view)
        self._frames.append(df)
        table: ir.Table = self.con.table(view)
        return table

    def load(self, name: str, build: Any) -> ir.Table:
        """Scan the source once into the cached view ``name`` holding ``build(raw)``;
        records without a usable ``received_at`` or ``status`` are refused, as on DuckDB."""
        table = self.materialise(name, build(self.raw))
        self._refuse_unplaced(table)
        return table

    def places(self, where: Where, *, limit: int | None = None) -> list[str]:
        """Where the raw rows matching ``where(raw)`` are: ``FILE line N`` for JSONL; the
        file for Parquet (Spark does not keep a Parquet record's number)."""
        if self.format == "jsonl":
            return [f"{f} line {n}" for f, n in self._numbered(where, limit)]
        hit = self.raw.filter(where(self.raw))
        files = self.execute(hit.select("source_file").distinct().order_by("source_file"))
        return [f"a record of {self.readable.name(_local(f))}" for f in files["source_file"]][
            :limit
        ]

    def _numbered(self, where: Where, limit: int | None) -> list[tuple[str, int]]:
        hit = self.raw.filter(where(self.raw))
        files = self.execute(hit.select("source_file").distinct())["source_file"]
        out: list[tuple[str, int]] = []
        sc = self.session.sparkContext
        for path in sorted(files):
            # textFile keeps blank lines, so the index is the true line number.
            pairs = sc.textFile(path).zipWithIndex().map(lambda p: (p[0], p[1] + 1))
            lines = self.session.createDataFrame(pairs, "value string, line_no long")
            one = _normalise(self, _jsonl_source(lines, self.mapping, path), ["line_no"])
            numbers = self.execute(one.filter(where(one)).select("line_no").order_by("line_no"))
            out += [(self.readable.name(_local(path)), int(n)) for n in numbers["line_no"]]
        return out[:limit] if limit is not None else out

    def close(self) -> None:
        """Uncache and drop this log's views (the Spark session stays up)."""
        for view in self._views:
            self.session.catalog.dropTempView(view)
        for df in self._frames:
            df.unpersist()
        self._views.clear()
        self._frames.clear()
        self.readable.cleanup()

    def __enter__(self) -> SparkDeliveryLog:
        return self


def read_delivery_log_spark(
    source: str | Path,
    *,
    format: LogFormat = "auto",
    mapping: ColumnMapping = DEFAULT_MAPPING,
    spark: Any = None,
    master: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    force: bool = False,
    temp_directory: str | Path | None = None,
) -> SparkDeliveryLog:
    """Open JSONL or Parquet files (a file, a glob or a directory) on Spark: the session
    given, else :func:`spark_session` for ``master``. ``max_line_bytes`` and ``force`` as
    on DuckDB, for local files; stand-ins go to ``temp_directory``. Remote URIs
    (``hdfs://``, ``s3a://``...) are passed to Spark as they are, unchecked."""
    text = str(source)
    fmt = detect_format(source) if format == "auto" else format
    if fmt not in ("jsonl", "parquet"):
        raise DeliveryLogError(
            f"{text}: the Spark engine reads JSONL and Parquet files; analyse a {fmt} store "
            "with engine='duckdb' or export it first (gptools webhooks export)"
        )
    remote = "://" in text
    files = [text] if remote else resolve_files(source, fmt)
    readable = None
    if fmt == "jsonl" and not remote:
        readable = readable_jsonl(
            files, max_line_bytes=max_line_bytes, force=force, decompress_zstd=True,
            temp_directory=temp_directory,
        )  # fmt: skip
    elif not remote:
        readable = readable_literal(files, temp_directory)
    try:
        return _open_spark(text, fmt, files, readable, mapping, spark, master)
    except BaseException:
        if readable is not None:
            readable.cleanup()
        raise


def _open_spark(
    text: str, fmt: str, files: list[str], readable: Any, mapping: ColumnMapping,
    spark: Any, master: str | None,
) -> SparkDeliveryLog:  # fmt: skip
    parent = spark if spark is not None else spark_session(master)
    session = parent.newSession()
    # A new session starts from the context's settings; the caller's runtime SQL settings
    # (shuffle partitions, adaptive execution...) are theirs to choose, so they carry over.
    for key, value in parent.conf.getAll.items():
        if key.startswith("spark.sql.") and key != "spark.sql.session.timeZone":
            with contextlib.suppress(Exception):
                session.conf.set(key, value)
    con = ibis.pyspark.connect(session)
    log = SparkDeliveryLog(
        con=con, source=text, format=fmt, candidates=[], files=files, mapping=mapping,
        session=session,
    )  # fmt: skip
    if readable is not None:
        log.readable = readable
    try:
        if fmt == "jsonl":
            lines = session.read.option("lineSep", "\n").text(log.readable.paths or files)
            src = _jsonl_source(lines, mapping, None)
        else:
            src = _parquet_source(
                session.read.parquet(*(log.readable.paths or files)), mapping, text
            )
        log.candidates.append(_normalise(log, src, []))
    except DeliveryLogError:
        raise
    except Exception as exc:
        raise _spark_error(text, exc) from None
    return log


def _MEMORY_AND_DISK() -> Any:
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


def _local(uri: str) -> str:
    """A ``file:`` URI as the local path it names (other URIs as they are)."""
    parts = urlsplit(uri)
    return unquote(parts.path) if parts.scheme == "file" else uri


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _path(name: str) -> str:
    """A variant path to a top-level key."""
    if name.isidentifier():
        return f"$.{name}"
    escaped = name.replace("\\", "\\\\").replace('"', '\\"').replace("'", "''")
    return f'$["{escaped}"]'


def _jsonl_source(lines: Any, mapping: ColumnMapping, path: str | None) -> Any:
    """Text lines (``value``) to the source columns: each line parsed once; blank lines
    dropped (DuckDB's reader skips them too)."""
    from pyspark.sql import functions as F

    file_col = F.lit(path) if path is not None else F.input_file_name()
    lines = lines.withColumn("source_file", file_col).filter(~F.col("value").rlike(r"^[ \t\r]*$"))
    doc = "try_parse_json(value)"
    return lines.selectExpr(
        "*",
        f"{doc} AS doc",
    ).selectExpr(
        "*",
        # Parsed, and an object: JSON text may only start an object with '{'.
        r"doc IS NULL OR NOT value RLIKE '^[ \t\r]*[{]' AS malformed",
        f"try_variant_get(doc, '{_path(mapping.received_at)}', 'string') AS received_at",
        f"try_variant_get(doc, '{_path(mapping.status)}', 'bigint') AS status",
        f"try_variant_get(doc, '{_path(mapping.latency_ms)}', 'double') AS latency_ms",
        f"try_variant_get(doc, '{_path(mapping.payload)}') AS payload",
        f"try_variant_get(doc, '{_path(mapping.body)}', 'string') AS body",
    )


def _parquet_source(df: Any, mapping: ColumnMapping, name: str) -> Any:
    from pyspark.sql import functions as F

    missing = [c for c in (mapping.received_at, mapping.status, mapping.latency_ms)
               if c not in df.columns]  # fmt: skip
    if missing:
        raise DeliveryLogError(
            f"{name}: column(s) {', '.join(missing)} not found (columns: "
            f"{', '.join(df.columns)}); pass a ColumnMapping naming them"
        )
    if mapping.payload in df.columns and hasattr(df.schema[mapping.payload].dataType, "names"):
        refuse_absent_fields(name, mapping.payload, df.schema[mapping.payload].dataType.names)
    texts = [c for c in (mapping.body, mapping.payload) if c in df.columns]
    if not texts:
        raise DeliveryLogError(
            f"{name}: neither a {mapping.payload!r} nor a {mapping.body!r} column; pass a "
            "ColumnMapping naming the request body"
        )
    body = " , ".join(f"CAST({_q(c)} AS STRING)" for c in texts)
    return df.withColumn("source_file", F.input_file_name()).selectExpr(
        "source_file",
        "false AS malformed",
        f"CAST({_q(mapping.received_at)} AS STRING) AS received_at",
        f"CAST({_q(mapping.status)} AS BIGINT) AS status",
        f"CAST({_q(mapping.latency_ms)} AS DOUBLE) AS latency_ms",
        "CAST(NULL AS VARIANT) AS payload",
        f"coalesce({body}) AS body",
    )


def _normalise(log: SparkDeliveryLog, src: Any, keep: list[str]) -> ir.Table:
    """The source columns onto :data:`RAW_COLUMNS`, with the shape rules of DuckDB's
    reader: a payload (not JSON null) wins over a body; a body is ``no_body``,
    ``not_json``, ``not_object`` or an ``object``; each field is its canonical JSON text,
    from the payload, else from the body."""
    scale = _latency_scale(log.mapping)
    fields = []
    for f in PAYLOAD_FIELDS:
        p = f"nullif(to_json(try_variant_get(payload, '$.{f}')), 'null')"
        b = f"nullif(to_json(try_variant_get(body_doc, '$.{f}')), 'null')"
        fields.append(f"CASE WHEN malformed THEN NULL ELSE coalesce({p}, {b}) END AS `{f}`")
    df = src.selectExpr(
        "*",
        "try_parse_json(body) AS body_doc",
        "CASE WHEN nullif(to_json(payload), 'null') IS NULL THEN NULL ELSE payload END AS payload_",
    ).selectExpr(
        *keep,
        "source_file",
        "CAST(try_cast(received_at AS TIMESTAMP) AS TIMESTAMP) AS received_at",
        "status",
        f"latency_ms * {scale!r} AS latency_ms",
        f"""CASE WHEN malformed THEN '{MALFORMED}'
                 WHEN payload_ IS NOT NULL AND NOT startswith(to_json(payload_), '{{')
                   THEN 'not_object'
                 WHEN payload_ IS NOT NULL THEN 'object'
                 WHEN body IS NULL THEN 'no_body'
                 WHEN body_doc IS NULL THEN 'not_json'
                 WHEN NOT startswith(to_json(body_doc), '{{') THEN 'not_object'
                 ELSE 'object' END AS shape""",
        *fields,
    )
    view = f"gp_raw_{log.tag}_{ibis.util.gen_name('src')}"
    df.createOrReplaceTempView(view)
    log._views.append(view)
    table: ir.Table = log.con.table(view)
    return table


def _spark_error(name: str, exc: Exception) -> DeliveryLogError:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "PATH_NOT_FOUND" in text:
        return DeliveryLogError(f"{name}: no such file")
    return DeliveryLogError(f"{name}: {first}")
