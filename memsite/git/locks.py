"""git's lock files (``index.lock``, ``<ref>.lock``), taken by memsite beside people using plain git.

A git lock file carries no owner: it may belong to a ``git commit`` running a
slow hook or waiting in its editor, and deleting it breaks that commit. So
memsite never deletes a lock it did not create, and recognises its own by an
owner record:

- to take ``X.lock`` memsite first creates a record in ``.git/memsite-locks/``
  whose name says which lock and which process (pid, process start time,
  host), then makes ``X.lock`` a hard link to it (``link`` fails if the lock
  exists, as ``O_EXCL`` does). Lock and record are one file, so there is no
  moment in which memsite's lock exists without its record, and a record can
  never vouch for somebody else's lock: "this lock is memsite's" is checked
  by comparing inodes.
- a lock whose record names a memsite process that has died (or whose pid now
  belongs to another process: the start time differs) is that writer's stale
  lock. It is taken back: moved aside, checked to still be the record's file,
  removed.
- any other lock (no record: git's own; or a live owner) is waited for, up to
  a timeout, and then reported with what to do. It is never removed.
- when memsite renames its lock over the target, the file it replaces is
  first linked beside the record (``<record>.old``), and both are removed
  once the writer has released its locks: freeing a file's blocks is the
  slowest part of such a rename, and is then done outside the lock. Those a
  killed writer left are removed with its records, and any writer removes one
  linked more than ten minutes ago (its owner may be on another machine).

Liveness uses ``/proc/<pid>/stat`` on Linux (a zombie counts as dead), else
``os.kill(pid, 0)`` on other POSIX systems; where neither exists, or the
owner ran on another host, memsite cannot tell and treats the lock as live.
On a file system without hard links the lock is created directly with
``O_EXCL`` and no record: safe, but a killed writer's lock is then reported
rather than taken back.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from ..foundation.errors import RepositoryError
from . import files

log = logging.getLogger("memsite")

RECORDS_DIR = "memsite-locks"
DEFAULT_TIMEOUT = 10.0
_TAKEN = ".taken"  # a stale lock moved aside while it is checked and removed
_OLD = ".old"  # a record's name + this: the file its lock replaced, removed once the writer is done
_counter = itertools.count()
_fallocate = getattr(os, "posix_fallocate", None)  # (not on Windows or macOS)
FALLOCATE_BYTES = 1 << 20  # locks up to this size have their blocks allocated before they are written
OLD_SECONDS = 600.0  # a replaced file kept longer than this is removed by any writer (its owner's host may differ)


@dataclass(frozen=True)
class Owner:
    """The process that created a lock: pid, its start time ("-" if unknown) and host."""

    pid: int
    started: str
    host: str

    def tag(self) -> str:
        return f"{self.pid}+{self.started}+{quote(self.host, safe='')}"

    @classmethod
    def from_tag(cls, tag: str) -> Owner | None:
        """The owner :meth:`tag` wrote, or None for a text it did not write."""
        parts = tag.split("+")
        if len(parts) != 3 or not parts[0].isdigit():
            return None
        return cls(int(parts[0]), parts[1], unquote(parts[2]))


def _proc_start(pid: int) -> str | None:
    """The start time of a running process from /proc (clock ticks after boot); None if none runs."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # the command name, in parentheses, may hold spaces
    if fields[0] in (b"Z", b"X"):  # a zombie has exited; only its exit status is left
        return None
    return fields[19].decode()


_HAS_PROC = os.path.exists("/proc/self/stat")
_me: Owner | None = None


def current_owner() -> Owner:
    """This process (computed again after a fork)."""
    global _me
    if _me is None or _me.pid != os.getpid():
        pid = os.getpid()
        _me = Owner(pid, (_proc_start(pid) if _HAS_PROC else None) or "-", socket.gethostname())
    return _me


def is_dead(owner: Owner) -> bool:
    """Whether the process ``owner`` names has certainly ended (a reused pid counts as ended)."""
    if owner.host != socket.gethostname():
        return False  # another machine sharing the repository: no way to tell
    if _HAS_PROC:
        started = _proc_start(owner.pid)
        return started is None or (owner.started != "-" and started != owner.started)
    if os.name == "posix":
        try:
            os.kill(owner.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # it exists, run by another user
        return False
    return False  # (Windows: os.kill would terminate it) never take a lock back without knowing


def _parse(name: str) -> tuple[str, Owner] | None:
    """(lock key, owner) from a record's file name, or None for a name memsite did not write."""
    key, _, rest = name.partition("+")
    tag, _, count = rest.rpartition("+")
    owner = Owner.from_tag(tag)
    return None if owner is None or not count.isdigit() else (key, owner)


def _remove_all(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)


# What a lock file is, as describe() finds it.
DEAD = "dead"  # memsite's own, left by a writer that has ended: taken back by the next writer (or doctor --fix)
LIVE = "live"  # memsite's own, held by a memsite process that is running
FOREIGN = "foreign"  # not memsite's: git's own (or memsite's without a record); never removed


@dataclass(frozen=True)
class LockState:
    """Whose a lock file is: ``state`` is DEAD, LIVE or FOREIGN; ``owner`` the memsite process, if memsite's."""

    state: str
    owner: Owner | None = None


class LockFile:
    """A git lock memsite holds: write the new content into it, then :meth:`commit` or :meth:`rollback`."""

    def __init__(self, path: Path, target: Path, record: Path | None, fd: int,
                 retired: list[Path] | None = None) -> None:
        self.path = path
        self.target = target
        self._record = record
        self._retired = retired
        self.fd = fd
        self._file = os.fstat(fd)
        self.done = False

    def write(self, data: bytes) -> None:
        """Make ``data`` the whole content of the lock (replacing what was written before)."""
        os.ftruncate(self.fd, 0)
        if _fallocate is not None and len(data) <= FALLOCATE_BYTES:
            with contextlib.suppress(OSError):
                # Its blocks taken now, not when it is renamed: ext4 writes out a file renamed over
                # another whose blocks are not allocated yet (auto_da_alloc), within the rename.
                # (Small ones only: where the file system cannot, the C library writes each block.)
                _fallocate(self.fd, 0, len(data))
        files.pwrite_all(self.fd, data)

    def commit(self, flush: Callable[[int], None] | None = None) -> None:
        """Put the content in place: rename the lock over its target, as git does.

        ``flush`` (a function of the descriptor) makes it durable first. The
        file it replaces is kept (a hard link beside the record) until
        :meth:`Locks.drop_retired`, so that freeing its blocks, the slowest
        part of the rename, happens once the writer has let go of its locks.
        """
        if flush is not None:
            flush(self.fd)
        fd, self.fd = self.fd, -1
        os.close(fd)
        old = None
        if self._retired is not None and self._record is not None:
            old = self._record.with_name(self._record.name + _OLD)
            try:
                os.link(self.target, old)
            except OSError:  # nothing there yet (a new ref), or no hard links here
                old = None
        try:
            os.replace(self.path, self.target)
        except BaseException:
            if old is not None:
                old.unlink(missing_ok=True)
            raise
        self.done = True
        if self._retired is None:
            self._drop_record()
            return
        self._retired += [path for path in (old, self._record) if path is not None]
        self._record = None

    def rollback(self) -> None:
        """Remove the lock, leaving the target as it was (nothing once committed)."""
        if self.done:
            return
        self.done = True
        if self.fd != -1:
            os.close(self.fd)
            self.fd = -1
        try:
            if _same_file(os.stat(self.path), self._file):  # still ours: never remove one someone put there
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            self._drop_record()

    def _drop_record(self) -> None:
        if self._record is not None:
            try:
                os.unlink(self._record)
            except FileNotFoundError:
                pass


class Locks:
    """Takes git lock files for one repository, with owner records in ``<common dir>/memsite-locks``."""

    def __init__(self, common_dir: Path, root: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.common_dir = common_dir
        self.root = root
        self.records = common_dir / RECORDS_DIR
        self.timeout = timeout
        self._keys: dict[Path, str] = {}
        self._retired: list[Path] = []  # records of locks committed, and the files they replaced (see drop_retired)
        self._remover: ThreadPoolExecutor | None = None
        self._remover_pid = -1

    def drop_retired(self) -> None:
        """Remove the records of the locks committed since last time, and the files those replaced.

        Called once the writer has released its locks. They are removed on a
        thread of their own, which the caller does not wait for: removing a
        replaced file frees its blocks, which costs the file system more than
        the rename did (on a disk with online discard). A
        process that dies first leaves them to the next writer's sweep.
        """
        if not self._retired:
            return
        retired, self._retired[:] = list(self._retired), []
        if self._remover is None or self._remover_pid != os.getpid():  # (none yet, or a forked child's copy)
            self._remover = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsite-unlink")
            self._remover_pid = os.getpid()
        self._remover.submit(_remove_all, retired)

    def close(self) -> None:
        """Remove what :meth:`drop_retired` has been given, and wait until that is done."""
        self.drop_retired()
        remover, self._remover = self._remover, None
        if remover is not None and self._remover_pid == os.getpid():
            remover.shutdown(wait=True)

    def _key(self, lock: Path) -> str:
        key = self._keys.get(lock)
        if key is None:
            key = self._keys[lock] = quote(os.path.relpath(lock, self.common_dir).replace(os.sep, "/"), safe="")
        return key

    def show(self, lock: Path) -> str:
        """The lock as a person would name it (``.git/index.lock``)."""
        try:
            return os.path.relpath(lock, self.root) if lock.is_relative_to(self.root) else str(lock)
        except ValueError:
            return str(lock)

    def acquire(self, target: Path) -> LockFile:
        """Take ``<target>.lock``: at once, after a dead memsite writer's lock is taken back, or after waiting.

        Raises:
            RepositoryError: someone else still held it after ``timeout`` seconds.
        """
        lock = target.with_name(target.name + ".lock")
        record = self.records / f"{self._key(lock)}+{current_owner().tag()}+{next(_counter)}"
        fd = self._create(record)
        deadline, pause = 0.0, 0.001
        try:
            while True:
                try:
                    os.link(record, lock)
                    return LockFile(lock, target, record, fd, self._retired)
                except FileExistsError:
                    pass
                except FileNotFoundError:
                    lock.parent.mkdir(parents=True, exist_ok=True)  # a new ref folder (refs/heads/agent/)
                    continue
                except OSError:  # no hard links on this file system: a plain lock, without a record
                    break
                if self.take_back(lock):
                    continue
                now = time.monotonic()
                deadline = deadline or now + self.timeout
                if now >= deadline:
                    raise RepositoryError(self.held_message(lock))
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        except BaseException:
            os.close(fd)
            record.unlink(missing_ok=True)
            raise
        os.close(fd)
        record.unlink(missing_ok=True)
        return self._acquire_plain(lock, target)

    def _create(self, record: Path) -> int:
        try:
            return os.open(record, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileNotFoundError:
            self.records.mkdir(exist_ok=True)
            return os.open(record, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)

    def _acquire_plain(self, lock: Path, target: Path) -> LockFile:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return LockFile(lock, target, None, os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                if time.monotonic() >= deadline:
                    raise RepositoryError(self.held_message(lock)) from None
                time.sleep(0.01)

    def wait_for(self, lock: Path) -> None:
        """Wait until a lock memsite does not take itself (``config.lock``) is gone.

        Raises:
            RepositoryError: it was still there after ``timeout`` seconds.
        """
        deadline = time.monotonic() + self.timeout
        while os.path.lexists(lock):
            if time.monotonic() >= deadline:
                raise RepositoryError(self.held_message(lock))
            time.sleep(0.005)

    def held_message(self, lock: Path) -> str:
        shown = self.show(lock)
        owner = self._owner_of(lock)
        holder = (f"memsite process {owner.pid} on {owner.host}" if owner is not None
                  else "another git process (a commit waiting for its editor?)" if lock.name == "index.lock"
                  else "another git process")
        return (f"{shown} is held by {holder}; memsite waited {self.timeout:g} s. Finish or stop that command "
                "and retry; remove the file only if no git command is running")

    def _owner_of(self, lock: Path) -> Owner | None:
        """The memsite process whose record is ``lock`` itself, if any."""
        found = self._record_of(lock)
        return found[1] if found is not None else None

    def _record_of(self, lock: Path) -> tuple[Path, Owner] | None:
        """The owner record that is the same file as ``lock`` (memsite made it), if any."""
        try:
            held = os.stat(lock)
        except FileNotFoundError:
            return None
        for record, owner in self._records(self._key(lock)):
            try:
                if _same_file(os.stat(record), held):
                    return record, owner
            except FileNotFoundError:
                continue
        return None

    def _records(self, key: str | None = None) -> list[tuple[Path, Owner]]:
        try:
            names = os.listdir(self.records)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            parsed = _parse(name)
            if parsed is not None and (key is None or parsed[0] == key):
                found.append((self.records / name, parsed[1]))
        return found

    def describe(self, lock: Path) -> LockState:
        """Whose ``lock`` is: a dead memsite writer's, a running memsite process's, or someone else's."""
        owner = self._owner_of(lock)
        if owner is None:
            return LockState(FOREIGN)
        return LockState(DEAD if is_dead(owner) else LIVE, owner)

    def take_back(self, lock: Path) -> bool:
        """Remove ``lock`` if a memsite writer that has died left it. True if the lock is gone."""
        if not os.path.lexists(lock):
            return True
        found = self._record_of(lock)
        if found is None or not is_dead(found[1]):
            return False
        record, owner = found
        if not self._remove_if_same(lock, record):
            return False
        log.warning("%s was left by memsite process %d, which has ended; removed it", self.show(lock), owner.pid)
        record.unlink(missing_ok=True)
        return True

    def _remove_if_same(self, lock: Path, record: Path) -> bool:
        """Move ``lock`` aside, and remove it only if it is still ``record``'s file (else put it back)."""
        aside = record.with_name(record.name + _TAKEN)
        try:
            os.rename(lock, aside)
        except FileNotFoundError:
            return True
        except OSError:  # it cannot be moved aside to be checked: left in place, and the wait for it names it
            return False
        if _same_file(os.stat(aside), os.stat(record)):
            aside.unlink(missing_ok=True)
            return True
        try:  # replaced between the check and the move: it is someone else's
            os.link(aside, lock)
        finally:
            aside.unlink(missing_ok=True)
        return False

    def sweep(self) -> None:
        """Take back the locks of memsite writers that died, and drop their leftover records."""
        try:
            names = os.listdir(self.records)
        except FileNotFoundError:
            return
        me = current_owner()
        known: dict[Owner, bool] = {}  # whether each writer seen has ended: one look per process

        def ended(owner: Owner) -> bool:
            if owner == me:  # (this process's own, which its thread is removing)
                return False
            if owner not in known:
                known[owner] = is_dead(owner)
            return known[owner]

        for name in names:
            path = self.records / name
            if name.endswith(_OLD):  # a file a lock replaced: nothing reads it, its writer removes it
                old = _parse(name[: -len(_OLD)])
                with contextlib.suppress(OSError):  # (its writer gone, or it was linked minutes ago)
                    if (old is not None and ended(old[1])) or time.time() - path.stat().st_ctime > OLD_SECONDS:
                        path.unlink()
                continue
            parsed = _parse(name)
            if parsed is None:
                if name.endswith(_TAKEN):
                    with contextlib.suppress(OSError):  # a stale lock already moved out of git's way
                        path.unlink()
                continue
            key, owner = parsed
            if not ended(owner):
                continue
            lock = self.common_dir / unquote(key)
            try:
                if _same_file(os.stat(lock), os.stat(path)):
                    self.take_back(lock)
                    continue
            except FileNotFoundError:
                pass
            path.unlink(missing_ok=True)  # its lock was committed or removed: nothing left to guard
