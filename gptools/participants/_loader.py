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
   rate tiers; the loader halves its concurrency when the client counts a rate-limit answer
   (the client's count is the only one, so each answer slows the load once) and grows it
   back one step per answer.
4. Each answer is committed to the journal before anything depends on it. What an error
   means for the chunk is decided by :func:`verdict`:

   - the rate-limit answer, 5xx, 408/425, time-outs and dropped connections (once the
     client's own retries are spent) send the chunk again after a backoff, up to
     ``max_attempts`` times; then it is left for the next run;
   - a connection that could not be had (``TransportError.sent`` false) before any request
     of the run reached the server raises at once: a wrong address or a server that is
     down, with nothing to resume; once one has got through it is a blip, sent again;
   - a refusal *about the ids* (``id_refusals``: the validation refusal) splits the chunk
     in halves until the refused ids stand alone; each is then rejected with the server's
     message while the rest of the chunk loads;
   - a refusal of the account, brand or campaign raises the client's error at once;
   - any other refusal (a 409, a 400 about the campaign, ...) stops the load with
     :class:`LoadStopped`: no id is rejected for someone else's error, and the same load
     run again sends those ids again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import re
import sys
import time
from collections import deque
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from gptools import _register_file, spec
from gptools._progress import progress as show_progress
from gptools._temporary import is_temporary_status
from gptools.client import Client, backoff_delay
from gptools.errors import (
    ApiError,
    BrandRequiredError,
    ForbiddenError,
    GptoolsError,
    NotAuthorizedError,
    NotFoundError,
    RateLimitedError,
    TransportError,
)
from gptools.participants._constants import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ATTEMPTS,
    ENV_JOURNAL_DIR,
    POLL_SECONDS,
    RESEND_BASE,
    RESEND_CAP,
    RESEND_RETRY_AFTER_CAP,
)
from gptools.participants._journal import Identity, Journal
from gptools.participants._recorded import record_load, register_path
from gptools.participants._sources import SourceLike, open_source
from gptools.participants._summary import LoadSummary, check_rejects_file, write_rejects
from gptools.participants._validate import Rejection, check_player_id

if TYPE_CHECKING:
    from gptools.campaigns import CampaignRegister

#: The participant endpoints a load can use (``spec.PARTICIPANT_ENDPOINTS``).
Endpoint = Literal["single", "batch"]


class LoadInterrupted(KeyboardInterrupt):
    """The load was interrupted (Ctrl-C); ``summary`` says where it stood. Run the same
    load again to resume it."""

    def __init__(self, summary: LoadSummary) -> None:
        super().__init__("load interrupted; run it again to resume")
        self.summary = summary


class LoadStopped(GptoolsError):
    """The server refused a request of the load for a reason that is not about its player
    ids (a 409, a 400 about the campaign, ...). No id was rejected for it: ``summary`` says
    where the load stands and ``error`` is the server's answer. Fix the cause, then run the
    same load again: it sends what is not yet acknowledged."""

    def __init__(self, summary: LoadSummary, error: ApiError) -> None:
        super().__init__(
            f"the load stopped: the server refused a request for a reason that is not about "
            f"its player ids, so no id was rejected for it: {error}. "
            f"{summary.not_attempted} player id(s) are left for the next run: fix the cause, "
            f"then run the same load again to resume"
        )
        self.summary = summary
        self.error = error


def default_journal_dir() -> Path:
    """Where journals go when none is named: ``$GPTOOLS_JOURNAL_DIR``, else
    ``$XDG_CACHE_HOME/gptools/journals``, else ``~/.cache/gptools/journals``."""
    if os.environ.get(ENV_JOURNAL_DIR):
        return Path(os.environ[ENV_JOURNAL_DIR])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gptools" / "journals"


def default_journal_path(identity: Identity) -> Path:
    """The default journal file of a load: one file per campaign, brand and input. The
    server is left out of the name on purpose: a journal of the same load made against
    another server (or sandbox state) is found there and set aside with a notice
    (:meth:`Journal.open`), never silently trusted or silently ignored."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", identity.campaign_id)[:40]
    return default_journal_dir() / f"participants-{safe}-{identity.key}.sqlite"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass
class _Work:
    """One request to make: ids of one chunk (all of it, or a half after a split)."""

    chunk_no: int
    ids: list[tuple[int, str]]
    attempts: int = 0
    not_before: float = 0.0
    #: Its answer is committed to the journal (a Ctrl-C after that need not record it).
    settled: bool = False


@dataclass
class _RunStats:
    requests: int = 0
    bisections: int = 0
    loaded: int = 0
    failed_chunks: int = 0
    last_error: str | None = None
    failed: set[int] = field(default_factory=set)


def load_participants(
    client: Client,
    campaign_id: str,
    source: SourceLike,
    *,
    brand: int | None = None,
    column: str | int | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    sheet: str | int | None = None,
    header: bool | None = None,
    skip_rows: int | None = None,
    journal: str | os.PathLike[str] | None = None,
    rejects: str | os.PathLike[str] | None = None,
    overwrite_rejects: bool = False,
    chunk_size: int | None = None,
    endpoint: Endpoint = "single",
    max_id_length: int = spec.PLAYER_ID_MAX_LENGTH,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    progress: bool | None = None,
    seed: int | None = None,
    id_refusals: Collection[tuple[int, str]] = spec.PARTICIPANT_ID_REFUSALS,
    restart: bool = False,
    notice: Callable[[str], object] | None = None,
    register: CampaignRegister | str | os.PathLike[str] | Literal[False] | None = None,
) -> LoadSummary:
    """Add every valid player of ``source`` to campaign ``campaign_id``; return the summary.

    ``source``: a CSV/TSV/Excel file path, a DataFrame, a Series or any iterable of ids
    (see :func:`open_source` for ``column``, ``encoding``, ``delimiter``, ``sheet``,
    ``header`` and ``skip_rows``: a file whose first rows could be a header, titles or ids
    is refused until ``header=`` and ``skip_rows=`` say which, before anything is sent).
    ``brand`` names the brand (or pass ``client.brand(ID)``; a ``brand`` that differs from
    the client's own raises :class:`ValueError`). ``journal`` is the SQLite
    file that makes the load resumable (default: :func:`default_journal_path`); running the
    same load again with the same journal sends only what was not acknowledged. ``rejects``
    is a CSV file to write the rejected rows to (not written when the list has no rows;
    never through a symbolic link): an existing file is replaced only when it is a rejects
    file (a re-run's) or empty, any other only with ``overwrite_rejects=True``.
    ``endpoint`` picks the participant endpoint: ``"single"`` (the documented
    ``.../participant``, the default) or ``"batch"``, the batch endpoint the document
    recommends for large lists (path assumed:
    ``spec.ENDPOINT_BATCH_PARTICIPANT_TEMPLATE``); both go through the same journal,
    bisection and rate tiers. ``chunk_size`` ids per request (default per endpoint:
    ``spec.PARTICIPANT_MAX_IDS`` or ``spec.BATCH_PARTICIPANT_MAX_IDS``, assumed), the
    endpoint and ``max_id_length`` (default ``spec.PLAYER_ID_MAX_LENGTH``, assumed) are fixed
    when a load starts; a resumed load keeps its own. Either endpoint goes beyond the
    back office's CSV import, which takes at most ``spec.BACK_OFFICE_CSV_IMPORT_MAX_ROWS``
    (50,000) players per file: a longer list needs no splitting here. ``progress``: a tqdm
    bar where a person watches (a terminal; a widget in Jupyter), a plain line every 10 s
    otherwise (:func:`gptools._progress.progress`); ``True`` forces the bar, ``False``
    shows nothing. ``seed`` makes the
    backoff jitter reproducible. ``id_refusals`` are the ``(status, code)`` answers that
    refuse some ids of a request, the only ones that split a chunk and reject ids
    (``spec.PARTICIPANT_ID_REFUSALS``, assumed).

    A journal is trusted only for the server it was made against
    (``client.server_identity``: a sandbox's state identity, new after a reset, or the
    provider's base URL): a journal of the same load made against another is set aside
    (renamed, listed by :func:`journal_summaries`) and the load starts over, with a
    one-line ``notice`` (default: printed to stderr). ``restart`` discards the journal and
    starts the load over deliberately. An empty list leaves no journal file, and so does a
    load that nothing reached the campaign by (the server refused the campaign, brand or
    account, or could not be reached, before any id was acknowledged): there is nothing to
    resume, and nothing counts against the campaign.

    As each run ends (complete, interrupted, stopped after some ids were acknowledged, or
    left with ids to resend) the load is recorded in the campaign ``register`` (``None``:
    the default file, :func:`~gptools.campaigns.default_register_path`; ``False``: not
    recorded): its counts and the ids the server acknowledged, the record that
    ``campaigns list/show/results`` read.
    The register is checked before anything is sent (:class:`~gptools.campaigns.
    RegisterError` when it cannot be written); should recording fail after the load, the
    summary says why (``register_error``, with a ``notice``) and running the same load
    again records it.

    Raises :class:`PlayerListError` for an unreadable source or a journal of another load
    (:class:`JournalBusyError` while another run uses the journal), the client's
    :class:`~gptools.errors.ApiError` subclasses when the server refuses the account, brand
    or campaign (:class:`~gptools.errors.InvalidRequestError` for an unknown campaign, after
    one request), :class:`LoadStopped` for another refusal that is not about the ids,
    :class:`~gptools.errors.TransportError` (``sent=False``) when no request of the run
    could reach the server within the client's retry budget, and
    :class:`LoadInterrupted` on Ctrl-C.
    """
    # Named in the journal's identity: the same load whether the brand came from the
    # client or from brand=.
    brand = client.effective_brand(brand)
    chunk_size = spec.participant_chunk_size(endpoint, chunk_size)
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    if max_id_length < 1:
        raise ValueError(f"max_id_length must be at least 1, got {max_id_length}")
    started = time.monotonic()
    if rejects is not None:
        # Before anything is read or sent: an output that cannot be written is bad input.
        check_rejects_file(Path(rejects), overwrite=overwrite_rejects)
    record_in = register_path(register)
    if record_in is not None:
        _register_file.check_writable(record_in, "nothing was sent")  # nothing unrecorded
    src = open_source(
        source,
        column=column,
        encoding=encoding,
        delimiter=delimiter,
        sheet=sheet,
        header=header,
        skip_rows=skip_rows,
    )
    try:
        identity = Identity(client.server_identity, campaign_id, brand, src.fingerprint)
        path = Path(journal) if journal is not None else default_journal_path(identity)
        book = Journal.open(path, identity, restart=restart)
    except BaseException:
        src.close()
        raise
    if book.set_aside is not None:
        (notice or _to_stderr)(
            f"notice: the journal {path} was made against another server or sandbox state "
            f"({book.set_aside_reason}), so it proves nothing here: set aside as "
            f"{book.set_aside.name}; sending every id"
        )
    resumed = book.staged
    try:
        if not resumed:
            header_name = src.details.get("column") if src.details.get("header") == "yes" else None

            def check(raw: str | None) -> str | Rejection:
                return check_player_id(
                    raw,
                    max_length=max_id_length,
                    header=header_name,
                    header_names=header is not False,
                )

            with show_progress(
                desc=f"reading {src.description}", unit="rows", show=progress, leave=False
            ) as bar:
                book.stage(
                    src.rows(),
                    check,
                    chunk_size=chunk_size,
                    progress=bar.update,
                    settings={
                        "source": src.description,
                        "max_id_length": str(max_id_length),
                        "endpoint": endpoint,
                        **{f"source.{k}": v for k, v in src.details.items()},
                    },
                )
    except BaseException:
        if resumed:
            book.close()
        else:
            book.discard()  # nothing was staged (the rows are one transaction)
        raise
    finally:
        src.close()
    interrupted = False
    try:
        # A resumed load keeps the endpoint it started with (journals from before the
        # option have none: they used the single endpoint).
        started_with = book.meta().get("endpoint", "single")
        sender = _Sender(
            client,
            campaign_id,
            brand,
            book,
            concurrency=concurrency,
            max_attempts=max_attempts,
            rng=random.Random(seed),
            batch=started_with == "batch",
            id_refusals=frozenset(id_refusals),
        )
        try:
            sender.run(progress)
        except KeyboardInterrupt:
            interrupted = True
        summary = _summarise(
            book,
            campaign_id,
            brand,
            sender,
            resumed=resumed,
            interrupted=interrupted,
            elapsed=time.monotonic() - started,
            rejects=Path(rejects) if rejects is not None else None,
        )
    except BaseException:
        # The server refused the account, brand or campaign, or could not be reached.
        nothing = _reached_nothing(book)
        _end(book, None if nothing else record_in, keep=not nothing)
        raise
    # A load that reached nothing and stopped (a refusal not about its ids) stays
    # resumable, but nothing of it is at the server: nothing to record.
    stopped_before = sender.stopped is not None and _reached_nothing(book)
    unrecorded = _end(book, None if stopped_before else record_in, keep=summary.rows > 0)
    if unrecorded is not None:
        (notice or _to_stderr)(f"warning: {unrecorded}")
        summary = dataclasses.replace(summary, register_error=unrecorded)
    summary = _write_rejects(summary, notice or _to_stderr)
    if interrupted:
        raise LoadInterrupted(summary)
    if sender.stopped is not None:
        raise LoadStopped(summary, sender.stopped)
    return summary


def _reached_nothing(book: Journal) -> bool:
    """Whether no id of the load can have reached the campaign: none acknowledged or
    refused by the server, and no request of an earlier run left without its answer."""
    counts = book.counts()
    return counts.loaded == 0 and counts.refused_by_server == 0 and book.unknown_at_open == 0


def _end(book: Journal, register: Path | None, *, keep: bool) -> str | None:
    """Close the journal, recording its load in ``register`` first; or, unless ``keep``,
    delete it (nothing to resume, nothing to record). Returns why recording failed."""
    if not keep:
        book.discard()
        return None
    try:
        if register is not None:
            record_load(register, book.meta(), book.counts(), book.loaded_ids())
    except _register_file.RegisterError as exc:
        return (
            f"the load is done but not recorded in the campaign register: {exc}; "
            "run the same load again to record it"
        )
    finally:
        book.close()
    return None


def _write_rejects(summary: LoadSummary, notice: Callable[[str], object]) -> LoadSummary:
    """Write the rejects file when there are rejects; a failure to write it is one
    notice (the load's result stands) and leaves the summary without the file."""
    if summary.rejects_file is None:
        return summary
    try:
        write_rejects(summary.journal, summary.rejects_file)
    except OSError as exc:
        message = f"cannot write the rejects file {summary.rejects_file}: {_os_reason(exc)}"
        notice(f"warning: {message}; the load's result stands")
        return dataclasses.replace(summary, rejects_file=None, rejects_error=message)
    return summary


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


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
        # Only rejects make a rejects file: a header-only file would read as a result.
        rejects_file=rejects if counts.rejected else None,
        loaded_this_run=stats.loaded,
        resumed=resumed,
        unknown_resent=book.unknown_at_open,
        chunk_size=book.chunk_size,
        chunks=counts.chunks,
        chunks_acknowledged=counts.chunks_acknowledged,
        requests=stats.requests,
        retries=sender.client_retries(),
        rate_limited=sender.client_rate_limited(),
        endpoint="batch" if sender.batch else "single",
        bisections=stats.bisections,
        failed_chunks=stats.failed_chunks,
        last_error=stats.last_error,
        interrupted=interrupted,
        elapsed_s=elapsed,
        set_aside=book.set_aside,
    )


class _Fatal(GptoolsError):
    """The load cannot go on; carries the client's error (``stop``: see :class:`LoadStopped`)."""

    def __init__(self, error: ApiError | TransportError, *, stop: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.stop = stop


#: What an error answer means for the chunk that got it (see :func:`verdict`).
RESEND: Final = "resend"
BISECT: Final = "bisect"
FATAL: Final = "fatal"
STOP: Final = "stop"


def verdict(
    exc: ApiError | TransportError,
    id_refusals: Collection[tuple[int, str]] = spec.PARTICIPANT_ID_REFUSALS,
) -> str:
    """What a chunk's error means: :data:`RESEND` (temporary: the rate-limit answer, 5xx,
    408/425, no answer), :data:`BISECT` (a refusal about the ids: ``(status, code)`` in
    ``id_refusals``), :data:`FATAL` (the account, brand or campaign is wrong, or the client
    refused locally) or :data:`STOP` (any other refusal: not about the ids)."""
    if isinstance(exc, TransportError | RateLimitedError):
        return RESEND
    status = exc.status
    if not exc.sent or isinstance(
        exc, NotAuthorizedError | ForbiddenError | NotFoundError | BrandRequiredError
    ):
        # Nothing in the chunk can fix these: the campaign, the account or the brand is wrong.
        return FATAL
    if status is not None and is_temporary_status(status):
        return RESEND
    if status is not None and exc.code is not None and (status, exc.code) in id_refusals:
        return BISECT
    return STOP


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
        batch: bool = False,
        id_refusals: frozenset[tuple[int, str]] = spec.PARTICIPANT_ID_REFUSALS,
    ) -> None:
        self.client = client
        self.batch = batch
        # Read here: _send runs in the pool's threads, the journal belongs to this one.
        self._chunk_size = book.chunk_size
        self.id_refusals = id_refusals
        #: The refusal that stopped the load (see :class:`LoadStopped`), if one did.
        self.stopped: ApiError | None = None
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
        # Whether any request of this run got to the server. Until one has, a connection
        # that cannot be had means a wrong address or a server that is down, not a blip:
        # the load stops at once instead of re-sending for a minute.
        self._reached = False

    def client_retries(self) -> int:
        """Retries the client made during this run."""
        return self.client.stats.retries - self._start.retries

    def client_rate_limited(self) -> int:
        """Rate-limit answers during this run: the client counts each one (retried or
        raised), so this is the only count."""
        return self.client.stats.rate_limited - self._start.rate_limited

    def _send(self, work: _Work) -> Any:
        ids = [pid for _, pid in work.ids]
        if self.batch:
            # The chunk size was chosen (or defaulted) for the batch endpoint when the load
            # started; the client's own batch limit is that choice.
            return self.client.add_participants_batch(
                self.campaign_id, ids, brand=self.brand, max_ids=max(len(ids), self._chunk_size)
            )
        return self.client.add_participants(self.campaign_id, ids, brand=self.brand)

    def run(self, progress: bool | None) -> None:
        """Send every open chunk; return when all have an answer (or gave up)."""
        counts = self.book.counts()
        done = counts.rows - counts.not_attempted
        chunks = deque(self.book.open_chunks())
        retry: deque[_Work] = deque()
        inflight: dict[Future[Any], _Work] = {}
        bar = show_progress(
            total=counts.rows,
            initial=done,
            desc=f"loading into {self.campaign_id}",
            unit="rows",
            show=progress,
        )
        pool = ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="gptools-participants"
        )
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
                finished, _ = wait(
                    inflight, timeout=self._timeout(retry), return_when=FIRST_COMPLETED
                )
                # Answers that arrived together are committed (and synced) together.
                with self.book.batch():
                    for future in finished:
                        # Left in flight until handled: a Ctrl-C that lands while its answer
                        # is being recorded records it below, so an answered chunk is never
                        # left "unknown" (and sent again) for want of a few instructions.
                        work = inflight[future]
                        try:
                            bar.update(self._handle(work, future, retry))
                        except _Fatal as exc:
                            fatal = fatal or exc
                        del inflight[future]
        except KeyboardInterrupt:
            # Record what is already in flight (a second Ctrl-C abandons it: those chunks
            # stay "sent", unknown, and are sent again on resume).
            for future in list(inflight):
                work = inflight.pop(future)
                if work.settled:
                    continue
                with contextlib.suppress(_Fatal):
                    self._handle(work, future, retry)
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
        if fatal is not None:
            if not fatal.stop:
                raise fatal.error
            assert isinstance(fatal.error, ApiError)  # only a refusal stops the load
            self.stopped = fatal.error

    def _timeout(self, retry: deque[_Work]) -> float:
        if not retry:
            return POLL_SECONDS
        return max(0.0, min(POLL_SECONDS, min(w.not_before for w in retry) - time.monotonic()))

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
        except (ApiError, TransportError) as exc:
            if isinstance(exc, TransportError) and not exc.sent and not self._reached:
                # Every attempt of the client (its retry budget) failed to connect, and no
                # request has ever got through: nothing to resume yet, say where it tried.
                self.stats.last_error = str(exc)
                raise _Fatal(exc) from exc
            self._reached = self._reached or exc.sent
            meaning = verdict(exc, self.id_refusals)
            if meaning == RESEND:
                delay = None
                if isinstance(exc, RateLimitedError) and exc.retry_after is not None:
                    delay = min(exc.retry_after, RESEND_RETRY_AFTER_CAP)
                self._resend(work, retry, exc, delay=delay)
                return 0
            assert isinstance(exc, ApiError)  # only RESEND takes a TransportError
            if meaning != BISECT:
                self.stats.last_error = str(exc)
                raise _Fatal(exc, stop=meaning == STOP) from exc
            self._probing = False
            return self._refused(work, exc, retry)
        self._probing = False
        self._reached = True
        self._limit = min(float(self.concurrency), self._limit + 1.0)
        self.book.record(work.chunk_no, loaded=[seq for seq, _ in work.ids])
        work.settled = True
        self.stats.loaded += len(work.ids)
        return len(work.ids)

    def _refused(self, work: _Work, exc: ApiError, retry: deque[_Work]) -> int:
        if len(work.ids) == 1:
            seq, _pid = work.ids[0]
            reason = f"refused by the server: HTTP {exc.status} {exc.code or ''}: {exc.message}"
            self.book.record(work.chunk_no, rejected=[(seq, reason)])
            work.settled = True
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
            delay = backoff_delay(work.attempts - 1, self.rng, base=RESEND_BASE, cap=RESEND_CAP)
        work.not_before = time.monotonic() + delay
        retry.append(work)

    def _watch_rate_limits(self) -> None:
        # The client counted every rate-limit answer (retried or raised to us): slowing
        # down on its count alone slows down once per answer.
        seen = self.client.stats.rate_limited
        if seen > self._seen_rate_limited:
            self._seen_rate_limited = seen
            self._slow_down()

    def _slow_down(self) -> None:
        self._limit = max(1.0, self._limit / 2)
