"""The log files on disk, before an engine reads them: what a file is by its first bytes
(Parquet, gzip, zstd, else text), whether a JSONL file looks like one, and its lines over
the reader's limit.

Facts only: :mod:`._readers` decides what to refuse. Every function streams the file in
bounded pieces; no line is ever held whole beyond ``max_line_bytes``.
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: A line longer than this (bytes, its newline apart) is a ``malformed_line``: the reader
#: never parses it, and memory stays bounded whatever the file holds. DuckDB's own object
#: limit (16 MiB by default) aborted the whole read instead.
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024

#: How many non-blank lines at the start of a JSONL file are looked at to tell whether it
#: is a delivery log at all; more than half of them not JSON objects refuses the file.
SNIFF_LINES = 1000

#: What replaces a line over the limit in the copy the engines read: not JSON, so both
#: engines count it a ``malformed_line`` at the same line number.
OVERSIZED_MARKER = b"gptools: line over max_line_bytes"

_MAGIC = {b"PAR1": "parquet", b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}
#: The name each compression must end with for a reader that picks the codec by name.
_SUFFIX = {"gzip": ".gz", "zstd": ".zst"}
_CHUNK = 4 * 1024 * 1024
#: A sampled line longer than this is judged by its first character only.
_SAMPLE_CAP = 64 * 1024


def magic(path: str | Path) -> str | None:
    """``parquet``, ``gzip`` or ``zstd`` when the file's first bytes say so, else None."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    return next((kind for sig, kind in _MAGIC.items() if head.startswith(sig)), None)


def open_stream(path: str | Path) -> Any:
    """The file's bytes, decompressed when its first bytes say gzip or zstd (streamed)."""
    kind = magic(path)
    if kind in _SUFFIX:
        import pyarrow as pa

        return pa.input_stream(str(path), compression=kind)
    return open(path, "rb")


def _chunks(stream: Any) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield bytes(chunk)


def first_lines(path: str | Path, n: int = SNIFF_LINES) -> list[bytes]:
    """The first ``n`` non-blank lines (each cut at 64 KiB; a longer one is judged by its
    start)."""
    out: list[bytes] = []
    line = bytearray()
    with open_stream(path) as stream:
        for chunk in _chunks(stream):
            start = 0
            while len(out) < n:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                line += piece[: max(0, _SAMPLE_CAP - len(line))]
                if end < 0:
                    break
                if line.strip():
                    out.append(bytes(line))
                line.clear()
                start = end + 1
            if len(out) >= n:
                return out
    if line.strip() and len(out) < n:
        out.append(bytes(line))
    return out


def blank_lines(path: str | Path) -> Iterator[bool]:
    """For each line of the file in order, whether it is blank (spaces, tabs, CR only):
    what a person's line count includes and a reader skips. No line is held whole."""
    blank, open_line = True, False
    with open_stream(path) as stream:
        for chunk in _chunks(stream):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                yield blank and not chunk[start:end].strip(b" \t\r")
                blank, open_line, start = True, False, end + 1
            if start < len(chunk):
                blank = blank and not chunk[start:].strip(b" \t\r")
                open_line = True
    if open_line:
        yield blank


def is_json_object(line: bytes) -> bool:
    """Whether a (sampled) line is a JSON object; a cut line, by its first character."""
    import json

    if len(line) >= _SAMPLE_CAP:
        return line.lstrip().startswith(b"{")
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def pieces(path: str | Path, max_line_bytes: int) -> Iterator[bytes | None]:
    """The file's (decompressed) bytes in order, each line over ``max_line_bytes`` (its
    newline apart) replaced by None. Holds at most one line of ``max_line_bytes`` and one
    read: the checks jump from newline to newline ``max_line_bytes`` apart, so a file
    with no long line costs a few searches per read."""
    limit = max_line_bytes
    pending = bytearray()  # the unfinished line's bytes, not yet given out (at most `limit`)
    dropping = False  # the unfinished line is over the limit: its bytes are dropped
    with open_stream(path) as stream:
        for chunk in _chunks(stream):
            start = 0
            if dropping:
                start = chunk.find(b"\n")
                if start < 0:
                    continue
                dropping = False
                yield None  # its newline is given out with the lines that follow
            last = chunk.rfind(b"\n", start)
            if last < 0:
                pending += chunk[start:]
            else:
                region = bytes(pending) + chunk[start : last + 1]
                pending = bytearray(chunk[last + 1 :])
                yield from _split_long(region, limit)
            if len(pending) > limit:
                pending, dropping = bytearray(), True
    if dropping:
        yield None
    elif pending:
        yield bytes(pending)


def _split_long(region: bytes, limit: int) -> Iterator[bytes | None]:
    """Whole lines (``region`` ends with a newline or is empty) with each one over
    ``limit`` replaced by None; a line's newline stays in the bytes that follow it."""
    kept = pos = 0
    # A line starting at `pos` ends at its first newline; any newline within `limit`
    # bytes of `pos` bounds every line between, so the search jumps to the last one.
    while pos < len(region):
        end = region.rfind(b"\n", pos, pos + limit + 1)
        if end >= 0:
            pos = end + 1
            continue
        end = region.find(b"\n", pos + limit + 1)
        if pos > kept:
            yield region[kept:pos]
        yield None
        kept, pos = end, end + 1
    if len(region) > kept:
        yield region[kept:]


def count_long_lines(path: str | Path, max_line_bytes: int) -> int:
    """How many lines of the file are over ``max_line_bytes``: the rule of :func:`pieces`
    without giving out (and so copying) any byte, the pass every file gets."""
    limit, count = max_line_bytes, 0
    line, over = 0, False  # bytes of the current line before `pos`; already counted
    with open_stream(path) as stream:
        for chunk in _chunks(stream):
            pos, n = 0, len(chunk)
            while pos < n:
                if line == 0:
                    # As in _split_long: any newline within `limit` bytes bounds every
                    # line before it.
                    end = chunk.rfind(b"\n", pos, pos + limit + 1)
                    if end >= 0:
                        pos = end + 1
                        continue
                    if pos + limit + 1 > n:
                        line = n - pos
                        break
                    count, over, line = count + 1, True, limit + 1
                end = chunk.find(b"\n", pos)
                line += (n if end < 0 else end) - pos
                if line > limit and not over:
                    count, over = count + 1, True
                if end < 0:
                    break
                line, over, pos = 0, False, end + 1
    return count


@dataclass
class ReadableFiles:
    """The files an engine reads for the user's files, and the way back.

    ``paths`` are what the engine opens: a user's file itself, or a stand-in in ``tmp``
    (a link under a name the engine takes literally and whose suffix names the codec, or
    a copy with each line over the limit replaced by :data:`OVERSIZED_MARKER`, line
    numbers unchanged). ``original`` maps a stand-in back to the user's file.
    """

    paths: list[str] = field(default_factory=list)
    original: dict[str, str] = field(default_factory=dict)
    tmp: tempfile.TemporaryDirectory[str] | None = None

    def name(self, path: str) -> str:
        """The user's file a read path stands for."""
        return self.original.get(path, path)

    def stand_in(self, path: str, name: str, temp_directory: str | Path | None) -> str:
        """A fresh path in this set's temporary directory, for the user's ``path``."""
        if self.tmp is None:
            self.tmp = tempfile.TemporaryDirectory(prefix="gptools-log-", dir=temp_directory)
        target = os.path.join(self.tmp.name, f"{len(self.original)}-{name}")
        self.original[target] = path
        return target

    def cleanup(self) -> None:
        """Remove the stand-ins."""
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None


def readable(
    path: str,
    files: ReadableFiles,
    *,
    compression: str | None,
    long_lines: int,
    max_line_bytes: int,
    decompress_zstd: bool,
    temp_directory: str | Path | None,
) -> None:
    """Add to ``files`` what an engine reads for the JSONL file ``path``: itself when its
    name is literal (no glob character) and its suffix names its compression; else a
    link that does; a plain copy when it has lines over the limit (or is zstd and the
    engine cannot read zstd)."""
    base = "".join("_" if c in "*?[]{}\\" else c for c in os.path.basename(path))
    if long_lines or (compression == "zstd" and decompress_zstd):
        plain = base.removesuffix(_SUFFIX.get(compression or "", ""))
        target = files.stand_in(path, plain, temp_directory)
        with open(target, "wb") as out:
            for piece in pieces(path, max_line_bytes):
                out.write(OVERSIZED_MARKER if piece is None else piece)
    elif (
        base != os.path.basename(path)
        or glob.has_magic(path)
        or (compression is not None and not path.lower().endswith(_SUFFIX[compression]))
    ):
        suffix = "" if compression is None else _SUFFIX[compression]
        target = files.stand_in(path, base.removesuffix(suffix) + suffix, temp_directory)
        os.symlink(os.path.abspath(path), target)
    else:
        target = path
    files.paths.append(target)
