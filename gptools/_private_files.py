"""The one way gptools creates a file for the user: owner-only (``0600``; a folder of such
files ``0700``).

Stores, journals, exports and rejects files hold deliveries, player ids and API traffic;
no other account on the machine should read them. A file is created with mode
:data:`PRIVATE_FILE_MODE` and the user's umask still applies on top, so a stricter umask
(``077``) wins and a looser one (``022``) cannot widen it. A caller that wants another mode
(an option of its own) passes ``file_mode``. A file that already exists keeps its mode:
the user chose it. SQLite creates its ``-wal`` and ``-shm`` files with the mode of the
database file, so creating the database file private is enough.

A file that must appear whole or not at all (an export) is written through
:func:`private_replacement`: a fresh temporary file beside it, renamed over the name only
once complete, so a reader never finds half a file under the final name, and a failure
leaves nothing there.

An output the user names (``--lost-out FILE``, ``--rejects FILE``, an export's ``OUT``)
follows one rule, :func:`check_output` and :func:`open_output`: an existing file is
refused unless the caller forces it, and a symbolic link is never written through,
forced or not (whatever it points at would be overwritten, keeping its own mode).

Reading a SQLite file somebody else may have named goes through :func:`sqlite_read_uri`:
a ``file:`` URI built by string formatting lets a name such as ``st?mode=rwc&x=1.sqlite3``
add its own query (opening the file writable) and ``%41`` decode to another name.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from gptools.errors import GptoolsError

#: Owner read and write, nobody else.
PRIVATE_FILE_MODE = 0o600
#: Owner read, write and search, nobody else (a folder of private files).
PRIVATE_DIR_MODE = 0o700


def private_opener(file_mode: int = PRIVATE_FILE_MODE) -> Callable[[str, int], int]:
    """An ``opener`` for :func:`open` (or anything that takes one) that creates files with
    ``file_mode`` (the umask still applies)."""

    def opener(path: str, flags: int) -> int:
        return os.open(path, flags | os.O_CLOEXEC, file_mode)

    return opener


def open_private(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    file_mode: int = PRIVATE_FILE_MODE,
    **kwargs: Any,
) -> IO[Any]:
    """:func:`open` ``path`` with ``mode`` (``"w"``, ``"wb"``, ``"a"``...), creating it
    owner-only when it does not exist; ``kwargs`` go to :func:`open` (``encoding``,
    ``newline``)."""
    return open(path, mode, opener=private_opener(file_mode), **kwargs)


def create_private(path: str | os.PathLike[str], *, file_mode: int = PRIVATE_FILE_MODE) -> Path:
    """Create ``path`` empty and owner-only when it does not exist (an existing file is left
    as it is) and return it: for files another library opens by name afterwards (SQLite,
    Parquet writers).

    An existing file is never opened: closing any descriptor of a file drops every POSIX
    lock this process holds on it, and SQLite's locks on a database another connection of
    the process has open are such locks (``O_EXCL`` creates or fails, without opening)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, file_mode))
    return Path(path)


@contextlib.contextmanager
def private_replacement(
    path: str | os.PathLike[str], *, file_mode: int = PRIVATE_FILE_MODE
) -> Iterator[IO[bytes]]:
    """A new file beside ``path``, open for binary writing, that takes ``path``'s name only
    once the block ends without an error: synced, renamed over ``path`` (one step: readers
    see the old file or the whole new one), the folder synced. On an error it is removed
    and ``path`` is left as it was.

    The file is created owner-only (``file_mode``, under the umask) and exclusively, so it
    is never an existing file or a symlink someone placed; the rename replaces a symlink
    at ``path`` instead of writing through it. A regular file already at ``path`` hands
    its mode on (the user chose it)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, file_mode)
    try:
        with open(fd, "wb", closefd=True) as fh:
            yield fh
            fh.flush()
            with contextlib.suppress(FileNotFoundError):
                existing = os.lstat(target)
                if stat.S_ISREG(existing.st_mode):
                    os.fchmod(fh.fileno(), stat.S_IMODE(existing.st_mode))
            os.fsync(fh.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def make_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` and any missing parent owner-only (``0700``, the umask on
    top) and return it; folders that exist keep their mode."""
    folder = Path(path)
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for p in reversed(missing):
        with contextlib.suppress(FileExistsError):
            p.mkdir(mode=PRIVATE_DIR_MODE)
    return folder


class OutputRefusedError(GptoolsError, OSError):
    """A path an output is not written to: a symbolic link, a directory, or an existing
    file without ``force``; the message names the path and what to do."""


def check_output(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """``path`` if an output may be written there, else :class:`OutputRefusedError`: a
    symbolic link is refused whatever ``force`` says (never written through), a directory
    too, and an existing file unless ``force``. For a command to refuse before it does
    its work; :func:`open_output` checks again as it opens."""
    target = Path(path)
    if target.is_symlink():
        raise OutputRefusedError(
            errno.ELOOP,
            f"{target} is a symbolic link; outputs are never written through one: "
            "name the file itself",
            str(target),
        )
    if target.is_dir():
        raise OutputRefusedError(errno.EISDIR, f"{target} is a directory", str(target))
    if not force and target.exists():
        raise OutputRefusedError(
            errno.EEXIST, f"{target} exists; force=True overwrites it", str(target)
        )
    return target


def open_output(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    force: bool = False,
    file_mode: int = PRIVATE_FILE_MODE,
    **kwargs: Any,
) -> IO[Any]:
    """:func:`open` an output the user named, under :func:`check_output`'s rule held as
    the file is opened: created owner-only (``file_mode``, under the umask) and, unless
    ``force``, only if it does not exist (``O_EXCL``); never through a symbolic link
    (``O_NOFOLLOW``, so one put in place after a check is refused too). ``mode`` is a
    writing mode (``"w"``, ``"wb"``); ``kwargs`` go to :func:`open`."""
    check_output(path, force=force)
    extra = os.O_CLOEXEC | os.O_NOFOLLOW | (0 if force else os.O_EXCL)

    def opener(name: str, flags: int) -> int:
        return os.open(name, flags | extra, file_mode)

    try:
        return open(path, mode, opener=opener, **kwargs)
    except FileExistsError:
        check_output(path)  # raises: the file appeared since the check
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            check_output(path, force=True)  # raises: a link appeared since the check
        raise


def sqlite_read_uri(path: str | os.PathLike[str]) -> str:
    """The ``file:`` URI that opens the SQLite file ``path`` read-only (``uri=True``), every
    character of the name that a URI would read (``?``, ``#``, ``%``, ``&``) escaped."""
    return f"file:{quote(str(Path(path).resolve()), safe='/')}?mode=ro"
