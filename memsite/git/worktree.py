"""Keeping the working tree and git's index in step with the branch.

After a write the file is on disk and ``git status`` shows nothing for it. The
commit itself never reads the shared index (that lost writes under
concurrency); the index is only told about the touched paths afterwards, by
one ``git update-index`` that runs while the commit objects are being built.

A journal listing the touched paths is written first and removed last. If a
writer is killed in between, the next writer puts those paths back to what
the branch says (the branch is the truth) before it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from ..errors import RepositoryError
from . import index as gitindex
from .refs import wait_until_unlocked

TMP_SUFFIX = ".memsite-tmp"
T = TypeVar("T")


def atomic_write(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Replace ``path`` with ``data`` so a reader or a crash never sees half a file.

    A temporary file in the same folder is renamed over the target; a kill
    leaves at most an orphan ``*.memsite-tmp`` file, swept by recovery.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Background(Generic[T]):
    """Run ``work`` on a second thread for the ``with`` block, or at once when ``run_here``.

    Leaving the block always waits for it, so nothing it does outlives the
    block; :meth:`result` returns its value or raises what it raised.
    """

    def __init__(self, work: Callable[[], T], *, run_here: bool = False) -> None:
        self._work = work
        self._run_here = run_here
        self.value: T | None = None  # what ``work`` returned, once it has
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        try:
            self.value = self._work()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def __enter__(self) -> Background[T]:
        if self._run_here:
            self._run()
        else:
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
    """Tell git's index about changed paths: started now, awaited with :meth:`wait`.

    New files usually go straight into the split index's delta (see
    ``gitindex``); otherwise one ``git update-index`` runs in the background.
    """

    def __init__(
        self, root: Path, git_dir: Path, paths: Iterable[str], new_files: Mapping[str, bytes] | None = None
    ) -> None:
        self.root = root
        self.git_dir = git_dir
        self.paths = sorted(set(paths))
        self._proc: subprocess.Popen[bytes] | None = None
        self._resplit = len(self.paths) >= gitindex.MAX_DELTA_ENTRIES
        if new_files and len(new_files) == len(self.paths):
            outcome = gitindex.add_new_files(root, git_dir, new_files)
            if outcome == gitindex.ADDED:
                return
            self._resplit = self._resplit or outcome == gitindex.RESPLIT
        self._proc = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        command = ["git", "update-index", "--add", "--remove"]
        if self._resplit:
            # With split index on (as init sets), fold a large delta into a
            # new shared base so later updates stay small.
            command.append("--split-index")
        proc = subprocess.Popen(
            [*command, "-z", "--stdin"],
            cwd=self.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write(b"".join(p.encode("utf-8", "surrogateescape") + b"\x00" for p in self.paths))
        proc.stdin.close()
        return proc

    def wait(self) -> None:
        """Wait for git; retry once after clearing an index.lock a dead process left."""
        if self._proc is None:
            return
        for attempt in range(2):
            proc, self._proc = self._proc, None  # waited for once: waiting again returns at once
            assert proc.stderr is not None
            err = proc.stderr.read().decode("utf-8", "replace")
            proc.stderr.close()
            if proc.wait() == 0:
                return
            if attempt == 0 and "index.lock" in err:
                wait_until_unlocked(self.git_dir / "index.lock")
                self._proc = self._start()
                continue
            raise RepositoryError(f"git update-index failed: {err.strip().splitlines()[-1] if err.strip() else 'no message'}")


class Journal:
    """The paths a write is changing in the working tree, kept until it is done.

    One file, rewritten in place (no file is created per write: on some disks
    that costs more than the rest of the write). It is empty between writes.
    A torn write leaves a prefix of the JSON list, which does not parse; that
    can only happen before the working tree is touched, so it is ignored.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def _file(self) -> int:
        if self._fd == -1:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def begin(self, paths: Iterable[str]) -> None:
        fd = self._file()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(sorted(paths)).encode("utf-8", "surrogateescape"), 0)

    def end(self) -> None:
        os.ftruncate(self._file(), 0)

    def pending(self) -> list[str]:
        fd = self._file()
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        try:
            paths = json.loads(data) if data else []
        except ValueError:
            return []
        return [p for p in paths if isinstance(p, str)] if isinstance(paths, list) else []

    def close(self) -> None:
        if self._fd != -1:
            os.close(self._fd)
            self._fd = -1


def wait_for_orphaned_index_updates(root: Path, timeout: float = 30.0) -> None:
    """Wait for any ``git update-index`` still running in this working tree.

    A writer killed while its ``git update-index`` ran leaves that process
    running; if it finished after recovery it would put back index entries
    recovery had just removed. Callers hold the repository lock, so no live
    memsite writer has one running. Needs /proc (Linux); elsewhere it
    returns at once.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return
    target = str(root.resolve())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = False
        for pid in os.listdir(proc):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                if b"update-index" in (proc / pid / "cmdline").read_bytes() and os.readlink(proc / pid / "cwd") == target:
                    running = True
                    break
            except OSError:
                continue
        if not running:
            return
        time.sleep(0.01)


def restore(root: Path, git_dir: Path, files: Mapping[str, bytes | None]) -> None:
    """Make the working tree and index hold exactly ``files`` (None: absent)."""
    for rel, data in files.items():
        if data is None:
            remove_file(root, rel)
        else:
            atomic_write(root / rel, data)
    sweep_temp_files(root, files)
    IndexUpdate(root, git_dir, files).wait()
