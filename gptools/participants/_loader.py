"""The bulk participant loader: read, validate, journal, send in chunks, account for all.

How a load runs:

1. The source is fingerprinted; with the server, campaign and brand that names the load
   and its journal. A journal that already holds the rows is resumed: the source is not
   parsed again.
2. Otherwise every row is read as a stream, validated and written to the journal; distinct
   valid ids are numbered in order of first appearance and cut into chunks.
3. The first chunk goes alone: an unknown campaign (403 INVALID_REQUEST) stops the load
   there, with the server's message. Then up to ``concurrency`` chunks are in flight on
   a thread pool over the (thread-safe) sync client, which keeps every request inside the
   rate tiers; the loader halves its concurrency when it sees a rate-limit response and
   grows it back one step per answer.
4. Each answer is committed to the journal before anything depends on it. 5xx answers,
   time-outs and dropped connections (once the client's own retries are spent) send the
   chunk again after a backoff, up to ``max_attempts`` times. A chunk refused with another
   4xx is split in halves until the refused ids stand alone; each is then rejected with the
   server's message while the rest of the chunk loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import re
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tqdm.auto import tqdm

from gptools import spec
from gptools.client import BrandClient, Client
from gptools.errors import (
    ApiError,
    BrandRequiredError,
    ForbiddenError,
    NotAuthorizedError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    TransportError,
)
from gptools.participants._journal import Identity, Journal
from gptools.participants._sources import SourceLike, open_source
from gptools.participants._summary import LoadSummary, write_rejects
from gptools.participants._validate import Rejection, check_player_id

#: Chunks in flight at once. The client's rate limiter decides when each may go; this only
#: bounds how many wait for an answer (about 130 requests a second need ~13 in flight at a
#: 100 ms round trip).
DEFAULT_CONCURRENCY: Final = 16
#: How many times one chunk is sent before the loader gives up on it for this run (each
#: send is itself retried by the client: ``Client(max_retries=...)``).
DEFAULT_MAX_ATTEMPTS: Final = 8
#: Backoff between the loader's own re-sends of a chunk: base, doubling, capped (seconds).
RESEND_BASE: Final = 0.5
RESEND_CAP: Final = 15.0
#: Environment variable naming the directory of default journals.
ENV_JOURNAL_DIR: Final = "GPTOOLS_JOURNAL_DIR"

_POLL: Final = 0.5


class LoadInterrupted(KeyboardInterrupt):
    """The load was interrupted (Ctrl-C); ``summary`` says where it stood. Run the same
    load again to resume it."""

    def __init__(self, summary: LoadSummary) -> None:
        super().__init__("load interrupted; run it again to resume")
        self.summary = summary


def default_journal_dir() -> Path:
    """Where journals go when none is named: ``$GPTOOLS_JOURNAL_DIR``, else
    ``$XDG_CACHE_HOME/gptools/journals``, else ``~/.cache/gptools/journals``."""
    if os.environ.get(ENV_JOURNAL_DIR):
        return Path(os.environ[ENV_JOURNAL_DIR])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gptools" / "journals"


def default_journal_path(identity: Identity) -> Path:
    """The default journal file of a load: one file per load identity."""
    key = "\n".join(identity.as_meta().values())
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", identity.campaign_id)[:40]
    return default_journal_dir() / f"participants-{safe}-{digest}.sqlite"


@dataclass
class _Work:
    """One request to make: ids of one chunk (all of it, or a half after a split)."""

    chunk_no: int
    ids: list[tuple[int, str]]
    attempts: int = 0
    not_before: float = 0.0


@dataclass
class _RunStats:
    requests: int = 0
    bisections: int = 0
    rate_limited: int = 0
    loaded: int = 0
    failed_chunks: int = 0
    last_error: str | None = None
    failed: set[int] = field(default_factory=set)


def load_participants(
    client: Client | BrandClient,
    campaign_id: str,
    source: SourceLike,
    *,
    brand: int | None = None,
    column: str | int | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    sheet: str | int | None = None,
    journal: str | os.PathLike[str] | None = None,
    rejects: str | os.PathLike[str] | None = None,
    chunk_size: int = spec.PARTICIPANT_MAX_IDS,
    max_id_length: int = spec.PLAYER_ID_MAX_LENGTH,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    progress: bool = True,
    seed: int | None = None,
) -> LoadSummary:
    """Add every valid player of ``source`` to campaign ``campaign_id``; return the summary.

    ``source``: a CSV/TSV/Excel file path, a DataFrame, a Series or any iterable of ids
    (see :func:`open_source` for ``column``, ``encoding``, ``delimiter``, ``sheet``).
    ``brand`` names the brand (or pass ``client.brand(ID)``). ``journal`` is the SQLite
    file that makes the load resumable (default: :func:`default_journal_path`); running the
    same load again with the same journal sends only what was not acknowledged. ``rejects``
    is a CSV file to write the rejected rows to (not written when the list has no rows).
    ``chunk_size`` ids per request (default ``spec.PARTICIPANT_MAX_IDS``, assumed) and
    ``max_id_length`` (default ``spec.PLAYER_ID_MAX_LENGTH``, assumed) are fixed when a
    load starts; a resumed load keeps its own. ``progress`` shows a tqdm bar (a widget in
    Jupyter). ``seed`` makes the backoff jitter reproducible.

    Raises :class:`PlayerListError` for an unreadable source or a journal of another load,
    the client's :class:`~gptools.errors.ApiError` subclasses when the server refuses the
    load as a whole (:class:`~gptools.errors.InvalidRequestError` for an unknown campaign,
    after one request), and :class:`LoadInterrupted` on Ctrl-C.
    """
    if isinstance(client, BrandClient):
        if brand is not None and brand != client.brand_id:
            raise ValueError(f"brand={brand} conflicts with the client's brand {client.brand_id}")
        brand = client.brand_id
        client = client.client
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    if max_id_length < 1:
        raise ValueError(f"max_id_length must be at least 1, got {max_id_length}")
    started = time.monotonic()
    src = open_source(source, column=column, encoding=encoding, delimiter=delimiter, sheet=sheet)
    try:
        identity = Identity(client.base_url, campaign_id, brand, src.fingerprint)
        path = Path(journal) if journal is not None else default_journal_path(identity)
        book = Journal.open(path, identity)
    except BaseException:
        src.close()
        raise
    try:
        resumed = book.staged
        if not resumed:
            header = src.details.get("column") if src.details.get("header") == "yes" else None

            def check(raw: str | None) -> str | Rejection:
                return check_player_id(raw, max_length=max_id_length, header=header)

            with tqdm(desc=f"reading {src.description}", unit="rows", disable=not progress,
                      leave=False) as bar:
                book.stage(
                    src.rows(), check, chunk_size=chunk_size, progress=bar.update,
                    settings={"source": src.description, "max_id_length": str(max_id_length),
                              **{f"source.{k}": v for k, v in src.details.items()}},
                )
    finally:
        src.close()
    try:
        sender = _Sender(client, campaign_id, brand, book, concurrency=concurrency,
                         max_attempts=max_attempts, rng=random.Random(seed))
        interrupted = False
        try:
            sender.run(progress)
        except KeyboardInterrupt:
            interrupted = True
        summary = _summarise(book, campaign_id, brand, sender, resumed=resumed,
                             interrupted=interrupted, elapsed=time.monotonic() - started,
                             rejects=Path(rejects) if rejects is not None else None)
    finally:
        book.close()
    if summary.rejects_file is not None:
        write_rejects(summary.journal, summary.rejects_file)
    if interrupted:
        raise LoadInterrupted(summary)
    return summary


def _summarise(
    book: Journal,
    campaign_id: str,
    brand: int | None,
    sender: _Sender,
    *,
    resumed: bool,
    interrupted: bool,
    elapsed: float,
    rejects: Path | None,
) -> LoadSummary:
    counts = book.counts()
    meta = book.meta()
    stats = sender.stats
    details = {k.removeprefix("source."): v for k, v in meta.items() if k.startswith("source.")}
    return LoadSummary(
        campaign_id=campaign_id,
        brand=brand,
        source=meta.get("source", ""),
        journal=book.path,
        rows=counts.rows,
        loaded=counts.loaded,
        rejected=counts.rejected,
        duplicate=counts.duplicate,
        not_attempted=counts.not_attempted,
        rejected_by_reason=counts.rejected_by_reason,
        source_details=details,
        # An empty list gets no rejects file: a header-only file would read as a result.
        rejects_file=rejects if counts.rows else None,
        loaded_this_run=stats.loaded,
        resumed=resumed,
        unknown_resent=book.unknown_at_open,
        chunk_size=book.chunk_size,
        chunks=counts.chunks,
        chunks_acknowledged=counts.chunks_acknowledged,
        requests=stats.requests,
        retries=sender.client_retries(),
        rate_limited=stats.rate_limited + sender.client_rate_limited(),
        bisections=stats.bisections,
        failed_chunks=stats.failed_chunks,
        last_error=stats.last_error,
        interrupted=interrupted,
        elapsed_s=elapsed,
    )


class _Fatal(Exception):
    """The server refused the load as a whole; carries the client's error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _is_fatal(exc: ApiError) -> bool:
    # Nothing in the chunk can fix these: the campaign, the account or the brand is wrong.
    return (
        not exc.sent
        or isinstance(exc, NotAuthorizedError | ForbiddenError | NotFoundError | BrandRequiredError)
    )


class _Sender:
    """Sends the open chunks of a journal; runs in the caller's thread, requests in a pool."""

    def __init__(
        self,
        client: Client,
        campaign_id: str,
        brand: int | None,
        book: Journal,
        *,
        concurrency: int,
        max_attempts: int,
        rng: random.Random,
    ) -> None:
        self.client = client
        self.campaign_id = campaign_id
        self.brand = brand
        self.book = book
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.rng = rng
        self.stats = _RunStats()
        self._start = client.stats
        # Concurrency now (AIMD); 1 until the first answer proves the campaign is there.
        self._limit = 1.0
        self._probing = True
        self._seen_rate_limited = self._start.rate_limited

    def client_retries(self) -> int:
        """Retries the client made during this run."""
        return self.client.stats.retries - self._start.retries

    def client_rate_limited(self) -> int:
        """Rate-limit responses the client saw (and retried) during this run."""
        return self.client.stats.rate_limited - self._start.rate_limited

    def _send(self, work: _Work) -> Any:
        ids = [pid for _, pid in work.ids]
        return self.client.add_participants(self.campaign_id, ids, brand=self.brand)

    def run(self, progress: bool) -> None:
        """Send every open chunk; return when all have an answer (or gave up)."""
        counts = self.book.counts()
        done = counts.rows - counts.not_attempted
        chunks = deque(self.book.open_chunks())
        retry: deque[_Work] = deque()
        inflight: dict[Future[Any], _Work] = {}
        bar = tqdm(total=counts.rows, initial=done, desc=f"loading into {self.campaign_id}",
                   unit="rows", disable=not progress)
        pool = ThreadPoolExecutor(max_workers=self.concurrency,
                                  thread_name_prefix="gptools-participants")
        fatal: _Fatal | None = None
        try:
            while True:
                if fatal is None:
                    self._dispatch(chunks, retry, inflight, pool)
                if not inflight:
                    if fatal is not None or (not chunks and not retry):
                        break
                    # Only backed-off re-sends are left: wait for the earliest.
                    time.sleep(max(0.0, min(w.not_before for w in retry) - time.monotonic()))
                    continue
                finished, _ = wait(inflight, timeout=self._timeout(retry),
                                   return_when=FIRST_COMPLETED)
                for future in finished:
                    work = inflight.pop(future)
                    try:
                        bar.update(self._handle(work, future, retry))
                    except _Fatal as exc:
                        fatal = fatal or exc
        except KeyboardInterrupt:
            # Record what is already in flight (a second Ctrl-C abandons it: those chunks
            # stay "sent", unknown, and are sent again on resume).
            for future in list(inflight):
                work = inflight.pop(future)
                with contextlib.suppress(_Fatal):
                    self._handle(work, future, retry)
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
        if fatal is not None:
            raise fatal.error

    def _timeout(self, retry: deque[_Work]) -> float:
        if not retry:
            return _POLL
        return max(0.0, min(_POLL, min(w.not_before for w in retry) - time.monotonic()))

    def _dispatch(
        self,
        chunks: deque[tuple[int, int, int]],
        retry: deque[_Work],
        inflight: dict[Future[Any], _Work],
        pool: ThreadPoolExecutor,
    ) -> None:
        limit = 1 if self._probing else max(1, int(self._limit))
        now = time.monotonic()
        while len(inflight) < limit:
            work = next((w for w in retry if w.not_before <= now), None)
            if work is not None:
                retry.remove(work)
            elif chunks:
                chunk_no, first, last = chunks.popleft()
                ids = self.book.pending_ids(first, last)
                if not ids:
                    self.book.record(chunk_no)
                    continue
                # Committed before sending: a crash from here on leaves the chunk "unknown".
                self.book.mark_sent(chunk_no)
                work = _Work(chunk_no, ids)
            else:
                return
            work.attempts += 1
            self.stats.requests += 1
            inflight[pool.submit(self._send, work)] = work

    def _handle(self, work: _Work, future: Future[Any], retry: deque[_Work]) -> int:
        """Record one answer; returns how many ids got their final outcome."""
        self._watch_rate_limits()
        try:
            future.result()
        except RateLimitedError as exc:
            self.stats.rate_limited += 1
            self._slow_down()
            self._resend(work, retry, exc, delay=exc.retry_after)
            return 0
        except (ServerError, TransportError) as exc:
            self._resend(work, retry, exc)
            return 0
        except ApiError as exc:
            if _is_fatal(exc):
                raise _Fatal(exc) from exc
            self._probing = False
            if exc.status is not None and 400 <= exc.status < 500:
                return self._refused(work, exc, retry)
            self._resend(work, retry, exc)
            return 0
        self._probing = False
        self._limit = min(float(self.concurrency), self._limit + 1.0)
        self.book.record(work.chunk_no, loaded=[seq for seq, _ in work.ids])
        self.stats.loaded += len(work.ids)
        return len(work.ids)

    def _refused(self, work: _Work, exc: ApiError, retry: deque[_Work]) -> int:
        if len(work.ids) == 1:
            seq, _pid = work.ids[0]
            reason = f"refused by the server: HTTP {exc.status} {exc.code or ''}: {exc.message}"
            self.book.record(work.chunk_no, rejected=[(seq, reason)])
            return 1
        # Split: both halves go first, so a refused chunk is settled before new ones start.
        self.stats.bisections += 1
        half = len(work.ids) // 2
        retry.appendleft(_Work(work.chunk_no, work.ids[half:]))
        retry.appendleft(_Work(work.chunk_no, work.ids[:half]))
        return 0

    def _resend(
        self, work: _Work, retry: deque[_Work], exc: BaseException, delay: float | None = None
    ) -> None:
        self.stats.last_error = str(exc)
        if work.attempts >= self.max_attempts:
            # Left "sent" in the journal: unknown, so the next run sends it again.
            if work.chunk_no not in self.stats.failed:
                self.stats.failed.add(work.chunk_no)
                self.stats.failed_chunks += 1
            return
        if delay is None:
            delay = min(RESEND_CAP, RESEND_BASE * 2 ** (work.attempts - 1))
            delay *= 1.0 - 0.25 * self.rng.random()
        work.not_before = time.monotonic() + delay
        retry.append(work)

    def _watch_rate_limits(self) -> None:
        seen = self.client.stats.rate_limited
        if seen > self._seen_rate_limited:
            self._seen_rate_limited = seen
            self._slow_down()

    def _slow_down(self) -> None:
        self._limit = max(1.0, self._limit / 2)

