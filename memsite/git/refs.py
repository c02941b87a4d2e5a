"""Branch refs: read, and move with compare-and-swap under git's own lock file.

A ref moves only if it still points where the writer started from
(``update-ref REF NEW OLD`` semantics). The lock is git's ``<ref>.lock``,
taken as ``locks`` describes, so memsite and any git command running beside
it exclude each other. Doing this in-process instead of running ``git
update-ref`` saves a subprocess on every write. Reflogs follow
``core.logAllRefUpdates``; the ref file and its reflog are flushed when
``core.fsync`` names references.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..foundation.errors import ConflictError, RepositoryError
from .locks import Locks
from .settings import GitSettings

ZERO = "0" * 40


class RefMoved(ConflictError):
    """The ref no longer pointed at the expected commit; nothing was changed."""


class Refs:
    """Refs of one repository (``git_dir`` for HEAD, ``common_dir`` for branches)."""

    def __init__(self, git_dir: Path, common_dir: Path, locks: Locks, settings: GitSettings | None = None) -> None:
        self.git_dir = git_dir
        self.common_dir = common_dir
        self.locks = locks
        self.settings = settings or GitSettings()
        self._flush = self.settings.flush("reference")
        self._head_path = str(git_dir / "HEAD")  # read several times a write: plain strings
        self._common = str(common_dir)

    def _head(self) -> str:
        try:
            return _read_small(self._head_path)
        except FileNotFoundError:
            raise RepositoryError(f"{self.git_dir}: no HEAD; is this a git repository?") from None

    def head_target(self) -> str | None:
        """The branch HEAD points at (``refs/heads/main``), None when detached."""
        text = self._head()
        if text.startswith("ref: "):
            return text[5:].strip()
        return None

    def head_commit(self) -> str | None:
        """The commit HEAD names (through its branch, or directly when detached); None on an unborn branch."""
        text = self._head()
        if text.startswith("ref: "):
            return self.read(text[5:].strip())
        return text or None

    def read(self, ref: str) -> str | None:
        """The commit id ``ref`` points at, or None if it does not exist yet."""
        try:
            value = _read_small(f"{self._common}/{ref}")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return self._read_packed(ref)
        if value.startswith("ref: "):
            return self.read(value[5:].strip())
        return value or None

    def _read_packed(self, ref: str) -> str | None:
        try:
            with open(self.common_dir / "packed-refs", encoding="utf-8") as handle:
                for line in handle:
                    if line.startswith(("#", "^")):
                        continue
                    sha, _, name = line.rstrip("\n").partition(" ")
                    if name == ref:
                        return sha
        except FileNotFoundError:
            pass
        return None

    def update(self, ref: str, new: str, old: str | None, *, ident: str, message: str) -> None:
        """Point ``ref`` at ``new`` if it still points at ``old`` (None: must not exist).

        Raises:
            RefMoved: the ref had moved; nothing was written.
            RepositoryError: another process held the ref's lock for too long.
        """
        if old is None:
            self._refuse_name_conflict(ref)  # (before the lock: its folder may be a ref's file)
        lock = self.locks.acquire(self.common_dir / ref)
        try:
            current = self.read(ref)
            if current != old:
                raise RefMoved(
                    f"{ref} moved from {(old or 'nothing')[:12]} to {(current or 'nothing')[:12]} during the write"
                )
            if old is None:
                self._refuse_name_conflict(ref)  # (again under the lock: created meanwhile)
            lock.write(f"{new}\n".encode())
            # The reflog is written under the ref's lock, as git does, so that
            # 'git reflog expire' (run by gc) never rewrites it underneath.
            line = f"{old or ZERO} {new} {ident}\t{message}\n".encode()
            self._append_log(ref, self.common_dir / "logs" / ref, line)
            if self.head_target() == ref:
                self._append_log("HEAD", self.git_dir / "logs" / "HEAD", line)
            lock.commit(self._flush)
        finally:
            lock.rollback()  # nothing once committed

    def _refuse_name_conflict(self, ref: str) -> None:
        """Refuse a new ``ref`` under another ref's name (``refs/heads/a/b`` beside ``refs/heads/a``) or
        above other refs (``refs/heads/a`` beside ``refs/heads/a/b``): git keeps one of the two.

        Raises:
            RepositoryError: naming the ref in the way.
        """
        parts = ref.split("/")
        above = ["/".join(parts[:i]) for i in range(2, len(parts))]  # refs/heads/a of refs/heads/a/b
        below = f"{ref}/"
        in_the_way = next((name for name in above if os.path.isfile(f"{self._common}/{name}")), None)
        if in_the_way is None and os.path.isdir(f"{self._common}/{ref}"):
            in_the_way = next((f"{ref}/{path.relative_to(self.common_dir / ref).as_posix()}"
                               for path in (self.common_dir / ref).rglob("*")
                               if path.is_file() and not path.name.endswith(".lock")), None)
        if in_the_way is None:
            with contextlib.suppress(FileNotFoundError):
                with open(self.common_dir / "packed-refs", encoding="utf-8") as handle:
                    for line in handle:
                        name = line.rstrip("\n").partition(" ")[2]
                        if not line.startswith(("#", "^")) and (name in above or name.startswith(below)):
                            in_the_way = name
                            break
        if in_the_way is not None:
            raise RepositoryError(f"cannot create {ref}: {in_the_way} exists (git keeps a ref or the refs "
                                  "under its name, not both)")

    def _append_log(self, ref: str, path: Path, line: bytes) -> None:
        """Append to the reflog; a missing one is created only where core.logAllRefUpdates says so."""
        flags = os.O_WRONLY | os.O_APPEND
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            if not self.settings.autocreate_reflog(ref):
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, flags | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            if self._flush is not None:
                self._flush(fd)
        finally:
            os.close(fd)


def _read_small(path: str) -> str:
    """The stripped text of a small file (HEAD, a ref): a few system calls, no file object."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode("utf-8", "surrogateescape").strip()
    finally:
        os.close(fd)
