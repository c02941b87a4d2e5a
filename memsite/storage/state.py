"""Where a store keeps its derived files (catalog, search index, vectors, activity journal).

In the repository's ``.memsite/`` when it can be written there: shared by
every process using that checkout, guarded by the repository lock. A
read-only checkout (or one whose ``.memsite/`` files belong to someone else)
is still read: its derived files go to a per-user cache folder,
``$XDG_CACHE_HOME/memsite/<hash of the checkout path>`` (``~/.cache`` when
unset), and when even that cannot be written, to a temporary folder removed
when the store closes. All of it is rebuilt from git, so nothing is lost by
keeping it elsewhere; reading never needs to write to the checkout or to
``.git``.

On a full disk (found when opening or updating a file fails for want of
room) the files are read from copies in this process's memory, made
without writing anything; the copies catch up with the branch there, and
writes are refused with :class:`DiskFull` until there is room again.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ..foundation.errors import DiskFull, RepositoryError
from ..git import Repository
from ..git.mutex import LockTimeout, ProcessLock
from .sqlite import COMPANIONS, copy_in_memory, set_aside

FILES = ("catalog.sqlite3", "activity.sqlite3", "vectors.sqlite3")
LOCK_TIMEOUT_SECONDS = 120.0
LOW_SPACE = 256 * 1024  # bytes free below which a failed write is blamed on the disk
_FULL = {errno.ENOSPC, errno.EDQUOT}
_copies = itertools.count(1)  # names the copies in memory of this process's stores


def free_bytes(path: Path) -> int | None:
    """Bytes free on the file system holding ``path`` (its nearest existing parent), if known."""
    for folder in (path, *path.parents):
        try:
            return shutil.disk_usage(folder).free
        except OSError:
            continue
    return None


def out_of_room(exc: BaseException, where: Path) -> bool:
    """Whether the OS, SQLite or git failure ``exc`` came from a full disk (or quota) holding ``where``.

    By ``errno``, else by the space left: SQLite reports a full disk as
    "disk I/O error" and git as "could not write config.lock".
    """
    if isinstance(exc, OSError) and exc.errno in _FULL:
        return True
    if isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", 0) & 0xFF == 13:  # FULL
        return True
    free = free_bytes(where)
    return free is not None and free < LOW_SPACE


def disk_full(where: Path) -> DiskFull:
    """The error of a write refused (or failed) for want of room at ``where``."""
    return DiskFull(f"disk full at {where}; nothing was written (free some space and retry)")


def writable(folder: Path) -> bool:
    """Whether memsite can keep its derived files in ``folder`` (it and every file it has there writable)."""
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return False
    files = [folder / (name + suffix) for name in FILES for suffix in ("", *COMPANIONS)]
    return all(os.access(path, os.W_OK) for path in files if path.exists())


def cache_folder(root: Path) -> Path:
    """The per-user folder for the derived files of the checkout at ``root``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memsite" / hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


class StateDir:
    """The folder a store's derived files live in, and the lock that guards them."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._temporary = False
        self._copies: dict[str, tuple[str, sqlite3.Connection]] = {}  # name -> its copy in memory (a full disk)
        self.in_memory = False
        if writable(repo.state_dir):
            self.path, self.shared = repo.state_dir, True
            return
        self.shared = False
        cache = cache_folder(repo.root)
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
        if writable(cache):
            self.path = cache
        else:
            self.path, self._temporary = Path(tempfile.mkdtemp(prefix="memsite-")), True
        self._lock = ProcessLock(self.path / "lock")

    def file(self, name: str) -> Path | str:
        """Where the derived file ``name`` is opened: in the folder, or the URI of its copy in memory.

        Raises:
            sqlite3.DatabaseError: a damaged file, copied into memory.
        """
        if not self.in_memory:
            return self.path / name
        if name not in self._copies:
            self._copies[name] = copy_in_memory(self.path / name, f"memsite-{os.getpid()}-{next(_copies)}/{name}")
        return self._copies[name][0]

    def to_memory(self) -> None:
        """Read the files from copies in memory from now on (each made when it is first opened)."""
        self.in_memory = True

    def to_disk(self) -> None:
        """Read and write the files in the folder again; the copies in memory are freed."""
        self.in_memory = False
        self._free_copies()

    def set_aside(self, name: str, when: datetime) -> Path:
        """Set the damaged file ``name`` aside (see :func:`sqlite.set_aside`), and free its copy in memory."""
        copy = self._copies.pop(name, None)
        if copy is not None:
            copy[1].close()
        return set_aside(self.path / name, when)

    def _free_copies(self) -> None:
        for _, keeper in self._copies.values():
            keeper.close()
        self._copies.clear()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lock that guards the derived files (the repository lock when they are in ``.memsite/``).

        Reads take it to bring the catalog up to date; it never repairs or
        writes anything in the repository. Copies in memory are this
        process's own: a thread lock guards them.
        """
        if self.in_memory:
            with self.repo.thread_lock:
                yield
            return
        if self.shared:
            with self.repo.locked(recover=False):
                yield
            return
        with self.repo.thread_lock:
            try:
                self._lock.acquire(LOCK_TIMEOUT_SECONDS)
            except LockTimeout:
                raise RepositoryError(f"{self.path}: another memsite process held its lock for "
                                      f"{LOCK_TIMEOUT_SECONDS:.0f} s; try again") from None
            try:
                yield
            finally:
                self._lock.release()

    def close(self) -> None:
        self._free_copies()
        if not self.shared:
            self._lock.close()
        if self._temporary:
            shutil.rmtree(self.path, ignore_errors=True)
