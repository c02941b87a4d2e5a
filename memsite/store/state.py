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
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import RepositoryError
from ..git import Repository
from ..git.mutex import LockTimeout, ProcessLock
from .sqlite import COMPANIONS

FILES = ("catalog.sqlite3", "activity.sqlite3", "vectors.sqlite3")
LOCK_TIMEOUT_SECONDS = 120.0


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

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the lock that guards the derived files (the repository lock when they are in ``.memsite/``).

        Reads take it to bring the catalog up to date; it never repairs or
        writes anything in the repository.
        """
        if self.shared:
            with self.repo.locked(recover=False):
                yield
            return
        with self.repo._thread_lock:
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
        if not self.shared:
            self._lock.close()
        if self._temporary:
            shutil.rmtree(self.path, ignore_errors=True)
