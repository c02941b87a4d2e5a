"""A lock between processes on one file, taken by every write of a process in turn.

``filelock`` opens, locks and closes the file on every acquire, with a
polling wait: a noticeable share of a write, and a waiter notices a release
only at its next poll. On POSIX this keeps the file open and uses
``flock`` directly (the same lock ``filelock`` takes, so the two exclude each
other): uncontended, one system call; contended, a waiting thread blocks in
the kernel, which hands the lock over the moment it is released, and the
caller gives up after the timeout. The kernel frees the lock when its holder
dies. A lock file removed or replaced meanwhile is noticed after locking, and
the file the path names now is locked instead. Elsewhere it is ``filelock``'s
lock.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from filelock import FileLock, Timeout

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # (Windows: the file lock alone)


class LockTimeout(Exception):
    """The lock was still held by another process after the timeout."""


class ProcessLock:
    """An exclusive lock on ``path`` between processes, re-entrant within one (callers hold a thread lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._pid = -1
        self._depth = 0
        self._fallback = FileLock(path) if fcntl is None else None

    def acquire(self, timeout: float) -> None:
        """Take the lock, waiting up to ``timeout`` seconds.

        Raises:
            LockTimeout: another process held it all that time.
        """
        if self._depth:
            self._depth += 1
            return
        if self._fallback is not None:
            try:
                self._fallback.acquire(timeout=timeout, poll_interval=0.001)
            except Timeout:
                raise LockTimeout(str(self.path)) from None
        else:
            deadline = time.monotonic() + timeout
            while not self._locked(deadline):
                pass
        self._depth = 1

    def _locked(self, deadline: float) -> bool:
        """Lock the file; False if it turned out to be one the path no longer names (take the new one)."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:  # (asked not to wait)
                raise LockTimeout(str(self.path)) from None
            self._wait(deadline)
        try:  # '.memsite/' is git-ignored: 'git clean -X' may have removed the file since it was opened
            same = os.path.samestat(os.fstat(self._fd), os.stat(self.path))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(self._fd)  # closing frees the lock on the old file
            self._fd = -1
        return same

    def _open(self) -> int:
        if self._pid != os.getpid():  # a forked child: its copy of the parent's file would keep the lock alive
            if self._fd != -1:
                os.close(self._fd)
            self._fd, self._pid = -1, os.getpid()
        if self._fd == -1:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _wait(self, deadline: float) -> None:
        """Block in the kernel on a second thread, so that the wait can end at ``deadline``.

        The thread waits on a file descriptor of its own: if it gets the lock
        after the caller gave up (or was interrupted), it frees it by closing
        that descriptor, which can never touch a lock the caller took since.
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        got = threading.Event()
        decided = threading.Lock()
        gave_up = False

        def block() -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                os.close(fd)
                return
            with decided:
                if gave_up:
                    os.close(fd)  # too late: closing frees it
                    return
                got.set()

        threading.Thread(target=block, name="memsite-lock-wait", daemon=True).start()
        done = False
        try:
            got.wait(max(0.0, deadline - time.monotonic()))
            done = True
        finally:
            with decided:
                if not got.is_set():
                    gave_up = True
                elif not done:  # interrupted (Ctrl-C) just as it came: let it go
                    os.close(fd)
        if not got.is_set():
            raise LockTimeout(str(self.path))
        os.close(self._fd)
        self._fd = fd  # the descriptor that holds the lock is kept for the next writes

    def release(self) -> None:
        self._depth -= 1
        if self._depth:
            return
        if self._fallback is not None:
            self._fallback.release()
            return
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd != -1 and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = -1


class SharedLock:
    """An exclusive lock between processes and between the threads of this one (not re-entrant)."""

    def __init__(self, path: Path) -> None:
        self._thread_lock = threading.Lock()
        self._pid = os.getpid()
        self._process_lock = ProcessLock(path)

    def acquire(self, timeout: float) -> bool:
        """Take it, waiting up to ``timeout`` seconds (0: only if free); whether it was taken."""
        if self._pid != os.getpid():  # a forked child: a thread of the parent may have held it then
            self._thread_lock, self._pid = threading.Lock(), os.getpid()
        deadline = time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout=timeout):
            return False
        try:
            self._process_lock.acquire(max(0.0, deadline - time.monotonic()))
        except LockTimeout:
            self._thread_lock.release()
            return False
        except BaseException:
            self._thread_lock.release()
            raise
        return True

    def release(self) -> None:
        self._process_lock.release()
        self._thread_lock.release()

    def close(self) -> None:
        self._process_lock.close()
