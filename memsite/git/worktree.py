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
import errno
import itertools
import json
import os
import re
import secrets
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from ..foundation.errors import RepositoryError
from . import files
from . import index as gitindex
from .locks import LockFile
from .settings import git_environment

TMP_SUFFIX = ".memsite-tmp"
_FRAME = struct.Struct("<II")  # see _WRITER
AHEAD_DIR = "ahead"  # in the state folder: files of a large commit written while it is prepared (see FilesAhead)
_FINISHED = re.compile(rb'\{"done": ("(?:[^"\\]|\\.)*")')  # how Journal.end's note starts (see Journal.finished)
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
        except BaseException as exc:  # noqa: BLE001 (handed to the caller by result())
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
        return self.value  # type: ignore[return-value]  # set, as work did not fail


# The program of the process that writes a commit's files ahead (see FilesAhead): frames of
# (name length, data length, name, data) on its input; at the end of it, the names it could not
# write on its output, one a line. It imports nothing of memsite's, so it starts quickly. Once
# its caller is gone (killed: the next writer sweeps the folder) it writes nothing more, and
# removes the file it was writing (where a process outliving its parent gets a new one: POSIX).
_WRITER = """
import os, signal, struct, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's: it ends this by closing the input
read, failed, caller = sys.stdin.buffer.read, [], int(sys.argv[1])
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
while len(head := read(8)) == 8 and os.getppid() == caller:
    size, length = struct.unpack("<II", head)
    name, data = read(size), read(length)
    try:
        try:
            fd = os.open(name, flags, 0o644)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(name), exist_ok=True)
            fd = os.open(name, flags, 0o644)
    except OSError:  # (not writable, or the name taken) the caller writes this one itself
        failed.append(name)
        continue
    try:
        try:
            view, done = memoryview(data), 0
            while done < len(data):
                done += os.write(fd, view[done:])
        finally:
            os.close(fd)
        if os.getppid() != caller:
            raise OSError("the caller is gone")
    except OSError:  # (a full disk) no half file left
        failed.append(name)
        try:
            os.unlink(name)
        except OSError:
            pass
sys.stdout.buffer.write(b"\\n".join(failed))
"""


class FilesAhead:
    """Working-tree files of a large commit, written ahead by a helper process while the caller prepares the rest.

    Creating a file is kernel time that a second core can spend while the
    caller's Python stages the next memories. A process rather than a thread:
    a thread takes Python's lock back after each of its system calls, and
    the caller's staging slowed by as much as the thread saved. Each file is
    written whole into a folder of memsite's own (``.memsite/ahead``,
    git-ignored, so a person's ``git status`` never lists it), under a name no
    other process uses; the commit, holding ``index.lock``, then only renames
    it into the working tree (:meth:`place`), instead of creating it there. A
    file whose bytes changed since, or that could not be written (or no helper
    could start), is written by the commit as usual. Whatever a killed writer
    left in the folder is removed by the next writer (:func:`sweep_ahead`);
    :meth:`discard` removes what a commit did not use.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder)
        self._names = itertools.count()
        self._suffix = f".{os.getpid()}{TMP_SUFFIX}"  # named as atomic_write's files are: 'memsite doctor' knows them
        self._proc: subprocess.Popen[bytes] | None = None
        self._broken = False  # no helper, or it stopped: nothing more is sent
        self._sent: dict[str, tuple[bytes, str]] = {}  # path -> (its bytes, the file the helper writes them to)
        self._stale: list[str] = []  # files sent for a path sent again since
        self._written: dict[str, tuple[bytes, str]] = {}  # once finished: what the helper wrote

    def add(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Have these (working-tree path, bytes) files written ahead."""
        if self._broken:
            return
        if self._proc is None:
            try:
                self._proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WRITER, str(os.getpid())],
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL)
            except (OSError, ValueError):  # (an embedded Python without an executable) the commit writes them
                self._broken = True
                return
        frames = []
        for path, data in items:
            name = f"{self.folder}/.{next(self._names)}{self._suffix}"
            encoded = os.fsencode(name)
            frames += [_FRAME.pack(len(encoded), len(data)), encoded, data]
            old = self._sent.get(path)
            self._sent[path] = (data, name)
            if old is not None:
                self._stale.append(old[1])
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(b"".join(frames))
            self._proc.stdin.flush()
        except OSError:  # the helper died: what it wrote is found by finish()
            self._broken = True

    def finish(self) -> None:
        """Wait until the helper has written every file added (a Ctrl-C meanwhile is raised once it is done,
        so that no file is written after the caller has moved on)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        interrupted = None
        failed = b""
        while True:
            try:
                failed = proc.communicate()[0]
                break
            except KeyboardInterrupt as exc:
                interrupted = exc
            except (OSError, ValueError):  # (its pipes broken) it is stopped
                proc.kill()
                proc.wait()
                break
        # What it could not write, or (stopped, killed) None: every file sent may be there, half written.
        missing = {os.fsdecode(name) for name in failed.split(b"\n")} if proc.returncode == 0 else None
        for path, (data, name) in self._sent.items():
            if missing is None:
                self._stale.append(name)
            elif name not in missing:
                self._written[path] = (data, name)
        self._sent.clear()
        for name in self._stale:
            if missing is None or name not in missing:  # (a name it could not write: not its file)
                with contextlib.suppress(OSError):
                    os.unlink(name)
        self._stale.clear()
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
        """Remove the files not placed."""
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()  # what it wrote is removed below, with the rest
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

    Given ``blobs`` (each path's blob id, None: removed) the update usually goes
    straight into the split index's delta (see ``gitindex``); otherwise one
    ``git update-index`` runs in the background
    on a copy of the index (in split mode the copy's ``link`` extension still
    names the shared index in the git dir), whose bytes then go into the lock.
    A writer killed meanwhile leaves that process changing only its copy.
    """

    def __init__(
        self, root: Path, git_dir: Path, lock: LockFile, paths: Iterable[str],
        blobs: Mapping[str, bytes | None] | None = None,
    ) -> None:
        self.root = root
        self.git_dir = git_dir
        self.lock = lock
        self.paths = sorted(set(paths))
        self._proc: subprocess.Popen[bytes] | None = None
        self._copy: Path | None = None  # the private copy of the index git works on, if it has to run
        self._source: tuple[os.stat_result, bytes] | None = None  # the index it copied: stat and checksum
        resplit = len(self.paths) >= gitindex.MAX_DELTA_ENTRIES
        if blobs and len(blobs) == len(self.paths):
            outcome = gitindex.update_files(root, git_dir, blobs, lock)
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
        # --info-only: every file's blob is memsite's to write (the commit's pack, stored before the
        # index is), so git only hashes the files, and never writes a loose copy of one it does not find yet.
        command = ["git", "update-index", "--add", "--remove", "--info-only"]
        if resplit:
            # With split index on (as init sets), fold a large delta into a
            # new shared base so later updates stay small.
            command.append("--split-index")
        proc = subprocess.Popen(
            [*command, "-z", "--stdin"],
            cwd=self.root,
            env=git_environment(GIT_INDEX_FILE=str(copy)),
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

    def finished(self) -> str | None:
        """The branch of a finished write's note, read from the journal's first bytes; None for any other record.

        The note of a large write names every file it wrote: the next writer
        reads only this much of it while that branch is still checked out.
        """
        found = _FINISHED.match(self._bytes(4096))
        return json.loads(found[1]) if found else None

    def _bytes(self, limit: int | None = None) -> bytes:
        """The journal's bytes (its first ``limit``); read without the write handle in a folder this process may
        not write (a read-only checkout: reads, and ``memsite doctor``, work there)."""
        try:
            fd = self._file()
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return b""
            return data if limit is None else data[:limit]
        return os.pread(fd, os.fstat(fd).st_size if limit is None else limit, 0)

    def read(self) -> object:
        """The journal's record as it is now (for :meth:`left_behind` and :meth:`pending_write`)."""
        data = self._bytes()
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
