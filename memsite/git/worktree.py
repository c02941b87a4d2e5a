"""Keeping the working tree and git's index in step with the branch.

After a write the file is on disk and ``git status`` shows nothing for it. The
commit itself never reads the shared index (that lost writes under
concurrency); the index is only told about the touched paths, while the
commit objects are being built, and the new index is written into the
``index.lock`` the writer holds, which is renamed into place once the branch
has moved (as ``git commit`` does). ``git update-index``, when it is needed,
runs on a private copy of the index (``GIT_INDEX_FILE``), never on the live one.

A journal listing the touched paths is written first and removed last. If a
writer is killed in between, the next writer puts those paths back to what
the branch says (the branch is the truth) before it starts.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from ..errors import RepositoryError
from . import files
from . import index as gitindex
from .locks import LockFile

TMP_SUFFIX = ".memsite-tmp"
AHEAD_DIR = "ahead"  # in the state folder: files of a large commit written while it is prepared (see FilesAhead)
INDEX_COPY_PREFIX = "memsite-index."  # in the git dir: private copies 'git update-index' works on
T = TypeVar("T")


def atomic_write(path: str | Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` with ``data`` so a reader or a crash never sees half a file.

    A temporary file in the same folder is renamed over the target; a kill
    leaves at most an orphan ``*.memsite-tmp`` file, swept by recovery.
    """
    folder, name = os.path.split(path)  # (on strings: a write of many files makes no Path objects)
    files.store(str(path), f"{folder}/.{name}.{os.getpid()}{TMP_SUFFIX}", data, mode=0o644,
                flush=os.fsync if fsync else None)
    if fsync:
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Background(Generic[T]):
    """Run ``work`` on a second thread for the ``with`` block.

    Leaving the block always waits for it, so nothing it does outlives the
    block; :meth:`result` returns its value or raises what it raised.
    """

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self.value: T | None = None  # what ``work`` returned, once it has
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        try:
            self.value = self._work()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def __enter__(self) -> Background[T]:
        self._thread = threading.Thread(target=self._run, name="memsite-worktree", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        interrupted = None
        while self._thread is not None and self._thread.is_alive():
            try:
                self._thread.join()
            except KeyboardInterrupt as exc:  # Ctrl-C: let the files be finished first
                interrupted = exc
        if interrupted is not None:
            raise interrupted

    def result(self) -> T:
        if self._error is not None:
            raise self._error
        return self.value  # type: ignore[return-value]


class FilesAhead:
    """Working-tree files of a large commit, written ahead on a thread while the caller prepares the rest.

    Creating a file is kernel time that a second core can spend while the
    caller's Python stages the next memories. Each file is written whole
    into a folder of memsite's own (``.memsite/ahead``, git-ignored, so a
    person's ``git status`` never lists it), under a name no other process
    uses; the commit, holding ``index.lock``, then only renames it into the
    working tree (:meth:`place`), instead of creating it there. A file whose
    bytes changed since, or that could not be written, is written by the
    commit as usual. Whatever a killed writer left in the folder is removed
    by the next writer (:func:`sweep_ahead`); :meth:`discard` removes what a
    commit did not use.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder)
        self._names = itertools.count()
        self._inbox: queue.SimpleQueue[list[tuple[str, bytes]] | None] = queue.SimpleQueue()
        self._written: dict[str, tuple[bytes, str]] = {}  # path -> (its bytes, the file holding them)
        self._thread: threading.Thread | None = None
        self._dropped = False  # (discard) the files still queued are not written

    def add(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Write these (working-tree path, bytes) files ahead."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="memsite-files-ahead", daemon=True)
            self._thread.start()
        self._inbox.put(list(items))

    def _run(self) -> None:
        suffix = f".{os.getpid()}{TMP_SUFFIX}"  # named as atomic_write's files are: 'memsite doctor' knows them
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | files.BINARY
        while (items := self._inbox.get()) is not None:
            for path, data in items:
                if self._dropped:
                    break
                name = f"{self.folder}/.{next(self._names)}{suffix}"
                try:
                    fd = files.open_in_folder(name, flags, 0o644)
                except OSError:  # (not writable, say) the commit writes this one itself
                    continue
                try:
                    try:
                        files.write_all(fd, data)
                    finally:
                        os.close(fd)
                except OSError:  # (a full disk) as above
                    with contextlib.suppress(OSError):
                        os.unlink(name)
                    continue
                old = self._written.get(path)
                self._written[path] = (data, name)
                if old is not None:
                    with contextlib.suppress(OSError):
                        os.unlink(old[1])

    def finish(self) -> None:
        """Wait until every file added is written (a Ctrl-C meanwhile is raised once the thread is done,
        so that no file is written after the caller has moved on)."""
        if self._thread is None:
            return
        self._inbox.put(None)
        interrupted = None
        while self._thread.is_alive():
            try:
                self._thread.join()
            except KeyboardInterrupt as exc:
                interrupted = exc
                self._dropped = True  # the rest is not needed: stop soon
        self._thread = None
        if interrupted is not None:
            raise interrupted

    def place(self, path: str, target: str, data: bytes) -> bool:
        """Rename the file written ahead for ``path`` to ``target`` if it holds ``data``; False if there is none."""
        found = self._written.pop(path, None)
        if found is None:
            return False
        if found[0] is data or found[0] == data:
            try:
                try:
                    os.replace(found[1], target)
                except FileNotFoundError:
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    os.replace(found[1], target)
                return True
            except OSError:  # (another file system under the working tree, say) written as usual
                pass
        with contextlib.suppress(OSError):
            os.unlink(found[1])
        return False

    def discard(self) -> None:
        """Remove the files not placed; those still queued are not written."""
        self._dropped = True
        try:
            self.finish()
        finally:
            for _, name in self._written.values():
                with contextlib.suppress(OSError):
                    os.unlink(name)
            self._written.clear()


def sweep_ahead(state_dir: Path) -> None:
    """Remove files a killed writer wrote ahead (under the write lock, no other writer of this checkout has any)."""
    folder = state_dir / AHEAD_DIR
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):  # (not memsite's to remove, or in use): never a reason to fail a write
            (folder / name).unlink()


def remove_file(root: Path, rel: str) -> None:
    """Delete ``rel`` and any folders it leaves empty (as git checkout does)."""
    path = root / rel
    path.unlink(missing_ok=True)
    parent = path.parent
    while parent != root:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def sweep_temp_files(root: Path, paths: Iterable[str]) -> None:
    """Remove temporary files a killed writer left beside ``paths``."""
    for folder in {(root / rel).parent for rel in paths}:
        try:
            for name in os.listdir(folder):
                if name.endswith(TMP_SUFFIX):
                    (folder / name).unlink(missing_ok=True)
        except FileNotFoundError:
            continue


class IndexUpdate:
    """Write into the held ``index.lock`` the index with ``paths`` updated: started now, finished by :meth:`wait`.

    New files usually go straight into the split index's delta (see
    ``gitindex``); otherwise one ``git update-index`` runs in the background
    on a copy of the index (in split mode the copy's ``link`` extension still
    names the shared index in the git dir), whose bytes then go into the lock.
    A writer killed meanwhile leaves that process changing only its copy.
    """

    def __init__(
        self, root: Path, git_dir: Path, lock: LockFile, paths: Iterable[str],
        new_files: Mapping[str, bytes] | None = None,
    ) -> None:
        self.root = root
        self.git_dir = git_dir
        self.lock = lock
        self.paths = sorted(set(paths))
        self._proc: subprocess.Popen[bytes] | None = None
        self._copy: Path | None = None  # the private copy of the index git works on, if it has to run
        self._source: tuple[os.stat_result, bytes] | None = None  # the index it copied: stat and checksum
        resplit = len(self.paths) >= gitindex.MAX_DELTA_ENTRIES
        if new_files and len(new_files) == len(self.paths):
            outcome = gitindex.add_new_files(root, git_dir, new_files, lock)
            if outcome == gitindex.ADDED:
                return
            resplit = resplit or outcome == gitindex.RESPLIT
        self._proc = self._start(resplit)

    def _start(self, resplit: bool) -> subprocess.Popen[bytes]:
        self._copy = copy = self.git_dir / f"{INDEX_COPY_PREFIX}{os.getpid()}.{secrets.token_hex(4)}"
        try:
            shutil.copyfile(self.git_dir / "index", copy)
        except FileNotFoundError:
            pass  # no index yet: git creates one
        else:
            with contextlib.suppress(OSError), open(copy, "rb") as handle:  # index.lock is held: it stays so
                handle.seek(-20, os.SEEK_END)
                self._source = (os.stat(self.git_dir / "index"), handle.read(20))
        command = ["git", "update-index", "--add", "--remove"]
        if resplit:
            # With split index on (as init sets), fold a large delta into a
            # new shared base so later updates stay small.
            command.append("--split-index")
        proc = subprocess.Popen(
            [*command, "-z", "--stdin"],
            cwd=self.root,
            env={**os.environ, "GIT_INDEX_FILE": str(copy)},
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write(b"".join(p.encode("utf-8", "surrogateescape") + b"\x00" for p in self.paths))
        proc.stdin.close()
        return proc

    def wait(self) -> None:
        """Wait for git, then put the index it wrote into the lock."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None  # waited for once: waiting again returns at once
        assert self._copy is not None
        try:
            assert proc.stderr is not None
            err = proc.stderr.read().decode("utf-8", "replace").strip()
            proc.stderr.close()
            if proc.wait() != 0:
                raise RepositoryError(f"git update-index failed: {err.splitlines()[-1] if err else 'no message'}")
            data = self._copy.read_bytes()
            self.lock.write(data)
            gitindex.note_fold(self.git_dir, self.lock, data, self.paths, self._source)
        finally:
            self._copy.unlink(missing_ok=True)


def sweep_index_copies(git_dir: Path) -> None:
    """Remove index copies a killed writer left (never a ``.lock`` its orphaned git may hold)."""
    for name in os.listdir(git_dir):
        if name.startswith(INDEX_COPY_PREFIX) and not name.endswith(".lock"):
            (git_dir / name).unlink(missing_ok=True)


class Journal:
    """The paths a write is changing in the working tree, kept until it is done.

    One file, rewritten in place (no file is created per write: on some disks
    that costs more than the rest of the write). Between writes it holds an
    empty list, or names what the last write left in the working tree of its
    branch (see :meth:`end`). A record is written over the last one and the
    file then cut to its length (never to zero: freeing and allocating its
    block at every write costs a disk with online discard more). A write
    torn in between leaves the new record followed by the old one's tail, or
    a prefix of it: neither parses, and that can only happen before the
    working tree is touched, so it is ignored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def _file(self) -> int:
        if self._fd == -1:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def begin(self, paths: Iterable[str], ref: str | None = None) -> None:
        """Record that ``paths`` of the checked-out branch ``ref`` are being changed in the working tree."""
        record = {"ref": ref, "paths": sorted(paths)} if ref is not None else sorted(paths)
        self._write(json.dumps(record).encode("utf-8", "surrogateescape"))

    def _write(self, data: bytes) -> None:
        fd = self._file()
        files.pwrite_all(fd, data)
        os.ftruncate(fd, len(data))

    def end(self, ref: str | None = None, left: Mapping[str, str | None] | None = None) -> None:
        """The write is done; ``left``: what it put in ``ref``'s working tree (path -> blob id, None: removed).

        A ``git checkout`` that wrote HEAD just after the write took its
        index for the branch it left (they had the same tree) would keep these
        files; :meth:`left_behind` lets the next writer take them back out.
        """
        data = b"[]"
        if ref is not None and left:
            data = json.dumps({"done": ref, "left": dict(left)}).encode("utf-8", "surrogateescape")
        try:
            self._write(data)
        except OSError:  # a full disk: the note is lost (the write itself is done); empty, the file needs no block
            os.ftruncate(self._file(), 0)

    def left_behind(self, record: object = None) -> tuple[str | None, dict[str, str | None]]:
        """(branch, path -> blob id) of what the last finished write left in that branch's working tree.

        ``record``: what :meth:`read` gave, if it has just been read.
        """
        record = self.read() if record is None else record
        if not isinstance(record, dict) or not isinstance(record.get("done"), str) \
                or not isinstance(record.get("left"), dict):
            return None, {}
        return record["done"], {p: b for p, b in record["left"].items() if isinstance(p, str)
                                and (b is None or isinstance(b, str))}

    def read(self) -> object:
        """The journal's record as it is now (for :meth:`left_behind` and :meth:`pending_write`)."""
        fd = self._file()
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        try:
            return json.loads(data) if data else []
        except ValueError:
            return []

    def pending(self) -> list[str]:
        """The paths an interrupted write left to repair ([] when none)."""
        return self.pending_write()[1]

    def pending_write(self, record: object = None) -> tuple[str | None, list[str]]:
        """(the branch it wrote to, None if not recorded; the paths) of an interrupted write."""
        record = self.read() if record is None else record
        if isinstance(record, dict) and "done" in record:
            return None, []  # a finished write's note, not an interrupted one
        ref = None
        if isinstance(record, dict):
            ref = record.get("ref") if isinstance(record.get("ref"), str) else None
            record = record.get("paths")
        return ref, [p for p in record if isinstance(p, str)] if isinstance(record, list) else []

    def close(self) -> None:
        if self._fd != -1:
            os.close(self._fd)
            self._fd = -1


def restore(root: Path, git_dir: Path, lock: LockFile, files: Mapping[str, bytes | None]) -> None:
    """Make the working tree hold exactly ``files`` (None: absent), and the held index lock the index for them."""
    for rel, data in files.items():
        if data is None:
            remove_file(root, rel)
        else:
            atomic_write(root / rel, data)
    sweep_temp_files(root, files)
    IndexUpdate(root, git_dir, lock, files).wait()
