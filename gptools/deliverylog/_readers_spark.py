"""Spark's readers: JSONL and Parquet files (one, a glob, a directory) become the
normalised table of :mod:`._contract` (the same as DuckDB's readers make), on a Spark
session. DuckDB's readers (:mod:`._readers`) are this module's sibling: neither imports
the other.

Spark has no JSON type; each line (or Parquet ``body``) is parsed once into a ``VARIANT``
(``try_parse_json``) and every payload field is kept as its canonical, minified JSON text
(``to_json``), which the Spark dialect (:mod:`._dialect_spark`) checks exactly as DuckDB's
checks its JSON values. A line that does not parse to a JSON object is ``malformed_line``;
its true line number comes from numbering the lines of its file (``zipWithIndex``), only
when asked. Local JSONL files pass the checks DuckDB's reader makes
(:func:`._contract.readable_jsonl`); Spark reads a stand-in where Hadoop needs one: a
link named for its codec (Hadoop picks gzip by name), a decompressed copy of a zstd file
(Hadoop's zstd codec needs native libraries), a copy without lines over the limit. Needs
the ``[spark]`` extra (PySpark) and Java 17 or newer.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import ibis
import ibis.expr.types as ir

from gptools import spec
from gptools._private_files import private_opener
from gptools.deliverylog import _dialect_spark, _files
from gptools.deliverylog._contract import (
    BODY_FIELDS,
    BODY_SHAPE_OTHERWISE,
    CAMPAIGN_ID,
    DEFAULT_MAPPING,
    KNOWN_COLUMNS,
    BaseDeliveryLog,
    ColumnMapping,
    DeliveryLogError,
    LogFormat,
    Where,
    campaign_text,
    checked_source,
    detect_format,
    latency_scale,
    readable_jsonl,
    readable_literal,
    refuse_absent_fields,
    resolve_files,
    shape_cases,
    unplaced,
)
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES
from gptools.errors import import_extra

#: The Spark master when neither ``spark_master=`` nor ``GP_SPARK_MASTER`` names one.
DEFAULT_SPARK_MASTER = "local[*]"
JAVA_HINT = (
    "Spark could not start Java; install Java 17 or newer "
    "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) and set JAVA_HOME if needed"
)


#: How many compiled query classes the sessions gptools starts keep (Spark's
#: ``spark.sql.codegen.cache.maxEntries``; its default is 100). One summary compiles about
#: 140, so with the default every later analysis in the same process compiled them all
#: again (the load's large classes are the slowest to compile) and ran them in the JVM's
#: interpreter until its compiler caught up: a third of a warm summary's time.
CODEGEN_CACHE_ENTRIES = 1000
_CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"

_spark_log: Path | None = None


def spark_log() -> Path:
    """Where the JVM that Spark starts writes its own log (its stderr): start-up notices and
    warnings would otherwise land in a notebook's output or a command's stderr.

    ``gptools-spark.log`` in a directory of this process's own, made by
    :func:`tempfile.mkdtemp` (owner-only, a name nobody can guess): a fixed path in
    ``$TMPDIR`` would let another account place a symlink there and send the log anywhere.
    """
    global _spark_log
    if _spark_log is None:
        _spark_log = Path(tempfile.mkdtemp(prefix="gptools-spark-")) / "gptools-spark.log"
    return _spark_log


@contextlib.contextmanager
def _jvm_stderr_to(path: Path) -> Iterator[None]:
    """Point this process's stderr (file descriptor 2) at ``path`` while a child starts:
    the JVM inherits it for its lifetime; Python's stderr is restored right after."""
    saved = os.dup(2)
    target = private_opener()(str(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def spark_session(master: str | None = None) -> Any:
    """The process's Spark session (created on first use) for ``master``, else
    ``GP_SPARK_MASTER``, else ``local[*]``. UTC, no web UI, room for every class the
    analyses compile (:data:`CODEGEN_CACHE_ENTRIES`); the JVM's own log goes to
    :func:`spark_log`."""
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
        with _jvm_stderr_to(spark_log()):
            session = (
                builder.master(master)
                .appName("gptools-analysis")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.session.timeZone", "UTC")
                .config(_CODEGEN_CACHE, str(CODEGEN_CACHE_ENTRIES))
                .getOrCreate()
            )
    except Exception as exc:
        if "JAVA" in str(exc).upper():
            raise DeliveryLogError(f"{JAVA_HINT} ({str(exc).splitlines()[0]})") from None
        raise
    session.sparkContext.setLogLevel("ERROR")
    return session


@dataclass(slots=True)
class SparkDeliveryLog(BaseDeliveryLog):
    """A delivery log on Spark: the interface of :class:`._contract.BaseDeliveryLog`, as
    DuckDB's :class:`._readers.DeliveryLog`. Its tables are checkpointed temporary views of
    a session of its own (``newSession()``: the caller's session keeps its settings and
    views), dropped on :meth:`close`."""

    con: Any
    source: str
    format: str
    candidates: list[ir.Table]
    files: list[str] = field(default_factory=list)
    mapping: ColumnMapping = field(default_factory=lambda: DEFAULT_MAPPING)
    #: Makes this log's view names its own (several logs may share a Spark session).
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    readable: _files.ReadableFiles = field(default_factory=_files.ReadableFiles)
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
        of re-planning the whole chain of expressions that built it. A table with an
        ``action_id`` is partitioned by it (the one shuffle by action): every later
        aggregate, join and window per action then runs where its rows already are. A
        per-delivery table (one with the order ``key`` too) is also sorted by action and
        key inside its partitions, once: later queries by action need no sort."""
        return self._materialise(name, expr)[0]

    def _materialise(
        self, name: str, expr: ir.Table, count: ir.Value | None = None
    ) -> tuple[ir.Table, int]:
        """:meth:`materialise`, and how many rows satisfy ``count`` (a condition on
        ``expr``'s rows), counted by the same job that computes them (Spark's
        observed metrics) instead of a query of its own."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        view = f"{name}_{self.tag}"
        observed = Observation(f"{view}_count") if count is not None else None
        try:
            if count is not None:
                # The condition as a column of the query, read by the observation only.
                expr = expr.mutate(_gp_count=count)
            df = self.session.sql(self.con.compile(expr))
            if observed is not None:
                flag = F.col("_gp_count")
                df = df.observe(observed, F.count(F.when(flag, 1)).alias("n")).drop("_gp_count")
            if "action_id" in df.columns:
                df = df.repartition("action_id")
                if "key" in df.columns:
                    # The checkpoint keeps the order, which the per-action aggregates
                    # (sort aggregates: they pick strings) and joins by action ask for.
                    df = df.sortWithinPartitions("action_id", F.col("key").asc_nulls_last())
            df = df.localCheckpoint(eager=True, storageLevel=_MEMORY_AND_DISK_DESER())
            df.createOrReplaceTempView(view)
        except Exception as exc:
            raise _spark_error(self.source, exc) from None
        self._views.append(view)
        self._frames.append(df)
        table: ir.Table = self.con.table(view)
        return table, int(observed.get["n"]) if observed is not None else 0

    def load(self, name: str, build: Callable[[ir.Table], ir.Table]) -> ir.Table:
        """Scan the source once into the cached view ``name`` holding ``build(raw)``;
        records without a usable ``received_at`` or ``status`` are refused, as on DuckDB
        (counted while the rows are computed: no query of its own)."""
        built = build(self.raw)
        table, n_bad = self._materialise(name, built, unplaced(built))
        self._refuse_unplaced_count(n_bad)
        return table

    def places(self, where: Where, *, limit: int | None = None) -> list[str]:
        """Where the raw rows matching ``where(raw)`` are: ``FILE line N`` for JSONL; the
        file for Parquet (Spark does not keep a Parquet record's number)."""
        if self.format == "jsonl":
            return [f"{f} line {n}" for f, n in self._numbered(where, limit)]
        files = self._matching(self.raw, where, "source_file")
        return [f"a record of {self.readable.name(_local(f))}" for f in files][:limit]

    def _numbered(self, where: Where, limit: int | None) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        sc = self.session.sparkContext
        for path in self._matching(self.raw, where, "source_file"):
            # textFile keeps blank lines, so the index is the true line number.
            pairs = sc.textFile(path).zipWithIndex().map(lambda p: (p[0], p[1] + 1))
            lines = self.session.createDataFrame(pairs, "value string, line_no long")
            one = _normalise(self, _jsonl_source(lines, self.mapping, path), ["line_no"])
            numbers = self._matching(one, where, "line_no")
            out += [(self.readable.name(_local(path)), int(n)) for n in numbers]
        return out[:limit] if limit is not None else out

    def _matching(self, table: ir.Table, where: Where, column: str) -> list[Any]:
        """The distinct values of ``column`` in the rows of ``table`` matching ``where``,
        in order. Rows are marked in a projection and the marks summed per value: a filter
        would be pushed down through every projection that builds the normalised columns,
        each reference replaced by its definition, and Spark spent about 35 s planning and
        compiling that on a log of two small files (1.5 s this way)."""
        marked = table.mutate(_gp_hit=where(table).cast("int64"))
        per_value = marked.group_by(column).aggregate(_gp_hits=marked._gp_hit.sum())
        hits = per_value.filter(per_value._gp_hits > 0).select(column).order_by(column)
        return list(self.execute(hits)[column])

    def close(self) -> None:
        """Uncache and drop this log's views (the Spark session stays up)."""
        for view in self._views:
            self.session.catalog.dropTempView(view)
        for df in self._frames:
            df.unpersist()
        self._views.clear()
        self._frames.clear()
        self.readable.cleanup()


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
    text = checked_source(source)
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
    # (shuffle partitions, broadcast thresholds...) are theirs to choose, so they carry
    # over, adaptive execution apart (below).
    chosen = parent.conf.getAll  # one round trip to the JVM
    for key, value in chosen.items():
        if key.startswith("spark.sql.") and key != "spark.sql.session.timeZone":
            with contextlib.suppress(Exception):
                session.conf.set(key, value)
    # Adaptive execution runs each stage of a query as a job of its own and re-plans
    # between them; the analysis's plans are fixed (its tables partitioned by action), so
    # each query runs as one job instead.
    session.conf.set("spark.sql.adaptive.enabled", "false")
    # HotSpot leaves a method over 8,000 bytes of bytecode to its interpreter; the typed
    # pass and the checks make whole-stage code far larger than that, which Spark compiles
    # unless told to split it (its documentation recommends 8000 on HotSpot). The caller's
    # own choice stands.
    if _HUGE_METHOD_LIMIT not in chosen:
        session.conf.set(_HUGE_METHOD_LIMIT, "8000")
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


_HUGE_METHOD_LIMIT = "spark.sql.codegen.hugeMethodLimit"


def _MEMORY_AND_DISK_DESER() -> Any:
    """Rows kept as objects, spilled to disk when memory runs short. PySpark's
    ``MEMORY_AND_DISK`` is serialized (with Java's serializer unless the session chose
    another): every later read of a table then deserialises each row, a tenth of the
    summary's CPU."""
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK_DESER


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


# --------------------------------------------------------------------------------------
# The typed pass: most rows proved valid without JSON texts
# --------------------------------------------------------------------------------------

#: The payload's fields as Spark reads them in the typed pass. ``bet`` is read as text only
#: to know the payload has one: Spark's reader takes ``"1.5"`` (a string) for a decimal, so
#: its value is read from its own token in the text (:func:`_with_bet_token`).
_PAYLOAD_DDL = (
    "actionId STRING, roundId STRING, gameId STRING, playerId STRING, `timestamp` STRING, "
    "bet STRING, currencyCode STRING, events ARRAY<STRING>"
)
#: The plain string fields of the declaration (``spec.GAME_EVENT_FIELDS``), each a
#: non-empty string.
_STRING_FIELDS = tuple(
    f.name for f in spec.GAME_EVENT_FIELDS if f.json_type == "string" and f.pattern is None
)
#: What the text of a JSON value that is not a string starts with (numbers, NaN and
#: Infinity, objects, arrays, true, false, null). Spark's reader gives such a value as its
#: text when asked for a string, so a string starting otherwise was a JSON string.
_NOT_STRING_START = ("-", "+", *"0123456789", "{", "[", "t", "f", "n", "N", "I")
#: A bet the typed pass accepts as it is: at most this many decimals and integer digits,
#: positive, no exponent. Any other bet (zero, negative, -0, 1e400, more digits) is left
#: to the general path, whose checks decide it.
_FAST_BET_DECIMALS = 3
_FAST_BET_INTEGER_DIGITS = 9


def _top_ddl(mapping: ColumnMapping) -> str:
    # A campaign id read as STRING: a JSON number gives its text, as on DuckDB.
    campaign = f", {_q(mapping.campaign_id)} STRING" if mapping.campaign_id is not None else ""
    return (
        f"{_q(mapping.received_at)} STRING, {_q(mapping.status)} BIGINT, "
        f"{_q(mapping.latency_ms)} DOUBLE, {_q(mapping.payload)} STRUCT<{_PAYLOAD_DDL}>, "
        f"{_q(mapping.body)} STRING{campaign}"
    )


def _occurs_once(text: Any, needle: str) -> Any:
    """Whether ``needle`` occurs exactly once in ``text``: a count by Java's regular
    expressions, which search a literal with Boyer-Moore (Spark's own byte searches
    behind ``substring_index``, ``instr`` and ``replace`` compare at every byte and cost
    0.7 s more per million lines). Matches are counted without overlap: a quoted key
    cannot overlap itself within a JSON text, where a quote is followed by structure."""
    from pyspark.sql import functions as F

    return F.regexp_count(text, F.lit(_java_literal(needle))) == 1


def _java_literal(text: str) -> str:
    """A Java regular expression matching ``text`` literally (``Pattern.quote``)."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


def _non_finite_re(literals: tuple[str, ...]) -> str:
    """A Java regular expression whose successive matches (``\\G``) each run from the
    previous one to the next of ``literals`` standing alone outside a JSON string (group
    1: what comes before it). A literal glued to a digit, a letter or a sign (``1NaN``,
    ``-NaN``, ``NaNs``) is no number to the receiver's parser; the matching stops there,
    and the text stays no JSON."""
    firsts = sorted({name[0] for name in literals})
    avoid = "".join("\\" + c if c in "-^]\\" else c for c in firsts)
    skip = [f'[^"{avoid}]', r'"(?:[^"\\]|\\.)*"']
    for c in firsts:
        rests = "|".join(_java_literal(n[1:]) for n in literals if n[0] == c)
        skip.append(f"{_java_literal(c)}(?!{rests})")
    names = "|".join(_java_literal(n) for n in sorted(literals, key=len, reverse=True))
    return rf"\G((?:{'|'.join(skip)})*+)(?<![0-9A-Za-z_.+\-])(?:{names})(?![0-9A-Za-z_.])"


_NON_FINITE_RE = _non_finite_re(spec.JSON_NON_FINITE_LITERALS)
#: A JSON number past every range the checks allow, which Spark's parser reads.
_PAST_RANGE = "1e400"


def _strict_json(text: Any) -> Any:
    """``try_parse_json(text)``, NULL unless ``text`` is exactly one JSON value (and
    whitespace), as DuckDB reads it. Spark's parsers read the first value and ignore what
    follows it, so ``{...} junk``, ``{...}}`` and two records run together would pass as
    the first. Wrapped in an array and in an object, the text parses both times only when
    nothing follows its value: anything after it breaks one wrapping or the other (a
    ``]`` the object, a ``}`` the array, a ``,`` with more values one of the two). The
    value is read back from the array: two parses, for the rows the typed pass did not
    prove only."""
    from pyspark.sql import functions as F

    # Spark's parser refuses the non-finite literals the receiver reads as numbers: each
    # one standing alone becomes a number past every range, so the body is JSON and a bet
    # of NaN is out_of_range, as on every other implementation (only texts holding one
    # pay for the expression).
    literal = F.lit(False)
    for name in {name.lstrip("-") for name in spec.JSON_NON_FINITE_LITERALS}:
        literal = literal | _has(text, name)
    text = F.when(literal, F.regexp_replace(text, _NON_FINITE_RE, "$1" + _PAST_RANGE)).otherwise(
        text
    )
    as_item = F.try_parse_json(F.concat(F.lit("["), text, F.lit("]")))
    as_member = F.try_parse_json(F.concat(F.lit('{"k":'), text, F.lit("}")))
    return F.when(as_member.isNotNull(), F.try_variant_get(as_item, "$[0]", "variant"))


def _ends_alone(text: Any) -> Any:
    """For the typed pass: nothing follows the text's object. Spark's ``from_json`` reads
    the first value of a text and ignores the rest, so a line with junk after its object,
    a stray brace, or two records run together by a lost newline would pass as its first
    record; DuckDB refuses them all. The text must end with a brace, no object may close
    right before another opens (``}{``, ``} {``, ``},{``: none is in a notification), and
    a text ending in ``}}`` must hold as many ``{`` as ``}``. A row that fails goes to the
    general path, whose parse is strict (:func:`_strict_json`).

    Byte searches, and the count (``split`` on one character, which Java does without a
    regular expression) only for texts ending in ``}}``: counting every line's braces
    costs 1.2 s per million lines. Left to the typed pass: text after the object that
    ends with a single brace and opens no object first (``{...} x:1}``, the tail of a
    record whose start was lost and that holds no ``"bet"``)."""
    from pyspark.sql import functions as F

    joined = _has(text, "}{") | _has(text, "} {") | _has(text, "},{")
    balanced = F.size(F.split(text, r"\{")) == F.size(F.split(text, r"\}"))
    nested_end = F.endswith(text, F.lit("}}"))
    return F.endswith(text, F.lit("}")) & ~joined & (~nested_end | balanced)


def _has(text: Any, needle: str) -> Any:
    """Whether ``needle`` occurs in ``text`` (a search by bytes)."""
    from pyspark.sql import functions as F

    return F.contains(text, F.lit(needle))


def _is_string_token(field: str, value: Any, text: Any) -> Any:
    """Whether the payload field ``field``, read by Spark as the string ``value`` from the
    JSON ``text`` of the payload, was a JSON string there: certain when the string cannot
    be the text of another JSON value; else the text must hold the key once, unescaped,
    followed by a quote."""
    from pyspark.sql import functions as F

    key = f'"{field}"'
    quoted = _has(text, f'{key}:"') | _has(text, f'{key}: "')
    seen = quoted & ~_has(text, "\\u") & _occurs_once(text, key)
    return F.when(~F.substring(value, 1, 1).isin(*_NOT_STRING_START), F.lit(True)).otherwise(seen)


def _with_bet_token(df: Any, p: Any, text: Any) -> tuple[Any, Any, Any]:
    """``df`` with the bet's token (from the payload's JSON ``text``) as a column of its
    own, computed once per row, and the bet's value and whether the typed pass may take
    it: the payload has a bet (``p.bet``, read as text: present and not null), the key
    occurs once in the text and unescaped (so that occurrence is the payload's own), and
    the token is a plain positive decimal number. Byte searches only (no character
    counting over the whole line)."""
    from pyspark.sql import functions as F

    once = p["bet"].isNotNull() & _has(text, '"bet":') & _occurs_once(text, '"bet"')
    once = once & ~_has(text, "\\u")
    rest = F.ltrim(F.substring_index(text, '"bet":', -1))
    token = F.rtrim(F.substring_index(F.substring_index(rest, ",", 1), "}", 1))
    # A column of its own: the checks below read the token several times, and a Spark
    # projection that cannot be compiled as a whole evaluates a repeated expression anew.
    df = df.withColumn("bet_token", F.when(once, token))
    token = F.col("bet_token")
    point = F.instr(token, ".")
    integer_digits = F.when(point > 0, point - 1).otherwise(F.length(token))
    plain = (
        token.isNotNull()
        & F.substring(token, 1, 1).between("0", "9")
        & (F.instr(F.lower(token), "e") == 0)
        & (integer_digits <= _FAST_BET_INTEGER_DIGITS)
        & ((point == 0) | (F.length(token) - point <= _FAST_BET_DECIMALS))
    )
    value = F.when(plain, token).try_cast("decimal(38,9)")
    return df, value, plain & (value > 0)


def _known(
    df: Any, received_at: Any, status: Any, latency: Any, p: Any, text: Any
) -> tuple[Any, dict[str, Any]]:
    """The typed pass over the rows of ``df``: ``known_valid`` (the row is a valid game event
    notification, proved from typed values and the few text checks that tell a string
    from another JSON value) and the validated values (:data:`._contract.KNOWN_COLUMNS`).
    Anything it cannot prove is left to the general path, which gives the reason."""
    from pyspark.sql import functions as F

    action_id = p["actionId"]
    ts = p["timestamp"]
    df, bet, bet_ok = _with_bet_token(df, p, text)
    events = p["events"]
    known_events = F.array(*(F.lit(name) for name in sorted(spec.KNOWN_EVENT_TYPES)))
    strings_ok = [(F.length(p[f]) > 0) & _is_string_token(f, p[f], text) for f in _STRING_FIELDS]
    layout = _dialect_spark.java_regex(spec.EVENT_TIMESTAMP_PATTERN)
    event_ts = F.when(ts.rlike(layout) & ~ts.startswith("0000"), ts).try_cast("timestamp_ntz")
    valid = (
        received_at.isNotNull()
        & status.isNotNull()
        & latency.isNotNull()
        & ~F.isnan(latency)
        & (F.abs(latency) < 1e300)
        & action_id.rlike(_dialect_spark.java_regex(spec.ACTION_ID_PATTERN))
        & event_ts.isNotNull()
        & bet_ok
        & events.isNotNull()
        # Not F.forall: a lambda keeps Spark from compiling the whole projection.
        & (F.size(F.array_except(events, known_events)) == 0)
    )
    for ok in strings_ok:
        valid = valid & ok
    valid = valid & _ends_alone(text)
    valid = F.coalesce(valid, F.lit(False))
    return df, {
        "known_valid": valid,
        "known_action_id": F.lower(action_id),
        "known_round_id": p["roundId"],
        "known_game_id": p["gameId"],
        "known_player_id": p["playerId"],
        "known_currency_code": p["currencyCode"],
        "known_event_ts": event_ts,
        "known_bet": bet,
        # Canonical already: the names it holds need no escape.
        "known_events": F.to_json(events),
    }


def _looks_like_time(text: Any) -> Any:
    """A ``received_at`` string that only a JSON string could have given (a number's text
    has no ``-`` after four digits)."""
    from pyspark.sql import functions as F

    return F.substring(text, 1, 1).between("0", "9") & (F.substring(text, 5, 1) == "-")


def _jsonl_source(lines: Any, mapping: ColumnMapping, path: str | None) -> Any:
    """Text lines (``value``) to the source columns; blank lines dropped (DuckDB's reader
    skips them too).

    First the typed pass: each line read once against an explicit schema
    (``from_json``), which is what Spark reads fast, and :func:`_known` decides which rows
    are valid on their face. Only the other rows (invalid or unusual ones: a few in a
    healthy log) are parsed into a ``VARIANT`` for the general path, whose field texts the
    checks of :mod:`._metrics` read."""
    from pyspark.sql import functions as F

    file_col = F.lit(path) if path is not None else F.input_file_name()
    value = F.col("value")
    # Nearly every line starts with its brace: only the others need the expression
    # (which would copy every line into a Java string).
    blank = ~F.startswith(value, F.lit("{")) & value.rlike(r"^[ \t\r]*\z")
    lines = lines.withColumn("source_file", file_col).filter(~blank)
    m = mapping
    t = F.when(F.startswith(value, F.lit("{")), F.from_json(value, _top_ddl(m)))
    lines = lines.withColumn("t", t)
    top = F.col("t")
    payload = top[m.payload]
    body = top[m.body]
    # The body is read when there is no payload key, or the key once with JSON null (as
    # writers that keep every column write it); a payload that is not an object is the
    # general path's to judge.
    key = f'"{m.payload}"'
    no_payload = ~_has(value, key) | (
        (_has(value, f"{key}:null") | _has(value, f"{key}: null")) & _occurs_once(value, key)
    )
    use_body = payload.isNull() & body.isNotNull() & no_payload
    body_fields = F.from_json(body, _PAYLOAD_DDL)
    p = F.when(payload.isNotNull(), payload).when(use_body, body_fields)
    text = F.when(payload.isNotNull(), value).when(use_body, body)
    received = F.when(_looks_like_time(top[m.received_at]), top[m.received_at])
    lines = lines.withColumn("p", p).withColumn("text", text)
    lines, known = _known(
        lines, received, top[m.status], top[m.latency_ms], F.col("p"), F.col("text")
    )
    lines = lines.select("*", *(c.alias(k) for k, c in known.items()))
    general = F.when(~F.col("known_valid"), _strict_json(value))
    doc = lines.withColumn("doc", general)
    campaign = []
    if m.campaign_id is not None:
        # The general path parses every line the typed pass did not prove valid.
        campaign.append(
            f"CASE WHEN known_valid THEN t.{_q(m.campaign_id)} ELSE try_variant_get(doc, "
            f"'{_path(m.campaign_id)}', 'string') END AS {CAMPAIGN_ID}"
        )
    return doc.selectExpr(
        "*",
        r"NOT known_valid AND (doc IS NULL OR NOT value RLIKE '^[ \t\r]*[{]') AS malformed",
        *(
            f"CASE WHEN known_valid THEN t.{_q(key)} "
            f"ELSE try_variant_get(doc, '{_path(key)}', '{kind}') END AS {name}"
            for name, key, kind in (
                ("received_at", m.received_at, "string"),
                ("status", m.status, "bigint"),
                ("latency_ms", m.latency_ms, "double"),
            )
        ),
        f"try_variant_get(doc, '{_path(m.payload)}') AS payload",
        f"try_variant_get(doc, '{_path(m.body)}', 'string') AS body",
        # A payload's bet of -0 reads as 0 from the variant: only the line's own text
        # keeps the sign (DuckDB reads the payload's text), for the rows the general path
        # judges that hold a payload at all.
        f"CASE WHEN NOT known_valid AND try_variant_get(doc, '{_path(m.payload)}') IS NOT NULL"
        " THEN value END AS payload_line",
        *campaign,
    )


def _parquet_source(df: Any, mapping: ColumnMapping, name: str) -> Any:
    from pyspark.sql import functions as F

    wanted = (mapping.received_at, mapping.status, mapping.latency_ms, mapping.campaign_id)
    missing = [c for c in wanted if c is not None and c not in df.columns]
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
    df = df.withColumn("source_file", F.input_file_name()).selectExpr(
        "source_file",
        "false AS malformed",
        f"CAST({_q(mapping.received_at)} AS STRING) AS received_at",
        f"CAST({_q(mapping.status)} AS BIGINT) AS status",
        f"CAST({_q(mapping.latency_ms)} AS DOUBLE) AS latency_ms",
        "CAST(NULL AS VARIANT) AS payload",
        f"coalesce({body}) AS body",
        "CAST(NULL AS STRING) AS payload_line",
        *(
            [f"CAST({_q(mapping.campaign_id)} AS STRING) AS {CAMPAIGN_ID}"]
            if mapping.campaign_id is not None
            else []
        ),
    )
    text = F.col("body")
    # A column of its own: parsed once, however many fields are read from it.
    df = df.withColumn("p", F.from_json(text, _PAYLOAD_DDL))
    p = F.col("p")
    received = F.when(F.col("received_at").isNotNull(), F.col("received_at"))
    df, known = _known(df, received, F.col("status"), F.col("latency_ms"), p, text)
    return df.select("*", *(c.alias(k) for k, c in known.items()))


#: The body-shape rule (:data:`._contract.BODY_SHAPE_RULES`) over the source columns.
_SHAPE = (
    "CASE "
    + " ".join(
        f"WHEN {condition} THEN '{shape}'"
        for condition, shape in shape_cases(
            {
                "known": "known_valid",
                "malformed": "malformed",
                "payload_not_object": (
                    "payload_ IS NOT NULL AND NOT startswith(to_json(payload_), '{')"
                ),
                "payload": "payload_ IS NOT NULL",
                "no_body": "body IS NULL",
                "body_not_json": "body_doc IS NULL",
                "body_not_object": "NOT startswith(to_json(body_doc), '{')",
            }
        )
    )
    + f" ELSE '{BODY_SHAPE_OTHERWISE}' END"
)


def _normalise(log: SparkDeliveryLog, src: Any, keep: list[str]) -> ir.Table:
    """The source columns onto :data:`._contract.RAW_COLUMNS`, with the shape rules of DuckDB's
    reader: a payload (not JSON null) wins over a body; a body is ``no_body``,
    ``not_json``, ``not_object`` or an ``object``; each field is its canonical JSON text,
    from the payload, else from the body. Rows the typed pass proved valid keep their
    values in the ``known_`` columns and get NULL fields here: nothing of this runs for
    them."""
    scale = latency_scale(log.mapping)
    fields = []
    for f in BODY_FIELDS:
        p = _field_text(f"try_variant_get(payload, '$.{f}')", number=f == "bet")
        b = _field_text(f"try_variant_get(body_doc, '$.{f}')", number=f == "bet")
        fields.append(
            f"CASE WHEN malformed OR known_valid THEN NULL ELSE coalesce({p}, {b}) END AS `{f}`"
        )
    from pyspark.sql import functions as F

    # The Column API passes the pattern as it is (a SQL literal would unescape it). A row
    # the typed pass proved valid has a bet that is no -0 (its token starts with a digit).
    negative_zero = F.when(
        ~F.col("known_valid"),
        F.coalesce(
            F.coalesce(F.col("payload_line"), F.col("body")).rlike(spec.BET_NEGATIVE_ZERO_PATTERN),
            F.lit(False),
        ),
    ).otherwise(F.lit(False))
    payload = "CASE WHEN nullif(to_json(payload), 'null') IS NULL THEN NULL ELSE payload END"
    df = (
        src.withColumn("bet_negative_zero", negative_zero)
        .withColumn("body_doc", F.when(~F.col("known_valid"), _strict_json(F.col("body"))))
        .selectExpr("*", f"{payload} AS payload_")
        .selectExpr(
            *keep,
            "source_file",
            "CAST(try_cast(received_at AS TIMESTAMP) AS TIMESTAMP) AS received_at",
            "status",
            f"latency_ms * {scale!r} AS latency_ms",
            f"{_SHAPE} AS shape",
            *fields,
            "bet_negative_zero",
            *KNOWN_COLUMNS,
            *([CAMPAIGN_ID] if log.mapping.campaign_id is not None else []),
        )
    )
    view = f"gp_raw_{log.tag}_{ibis.util.gen_name('src')}"
    df.createOrReplaceTempView(view)
    log._views.append(view)
    table: ir.Table = log.con.table(view)
    if log.mapping.campaign_id is not None:
        # The one rule for an id's text, as DuckDB's readers apply it.
        table = table.mutate(**{CAMPAIGN_ID: campaign_text(table[CAMPAIGN_ID])})
    return table


def _field_text(value: str, *, number: bool) -> str:
    """SQL for the canonical JSON text of a variant field (NULL for JSON null). A
    ``number`` field that is an infinite or NaN double is written as DuckDB writes a
    number past any range, unquoted (``to_json`` quotes it as a string)."""
    text = f"nullif(to_json({value}), 'null')"
    if not number:
        return text
    return (
        f"CASE WHEN schema_of_variant({value}) = 'DOUBLE' AND startswith({text}, '\"')"
        f" THEN replace({text}, '\"', '') ELSE {text} END"
    )


def _spark_error(name: str, exc: Exception) -> DeliveryLogError:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if "PATH_NOT_FOUND" in text:
        return DeliveryLogError(f"{name}: no such file")
    return DeliveryLogError(f"{name}: {first}")
