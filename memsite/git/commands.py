"""Running git itself: one command, a ``cat-file --batch`` of many objects, a persistent object reader.

The few things memsite leaves to git (a walk of the log, a three-way merge
of a file, objects stored as deltas, refreshing the index) go through here,
always with :func:`~memsite.git.settings.git_environment`, so that what a hook
running memsite set (``GIT_DIR``, ``GIT_INDEX_FILE``...) never points a
command at another repository.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import RepositoryError
from .settings import git_environment


class GitFailed(RepositoryError):
    """A git command ended with a non-zero exit status."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.args_run = tuple(args)
        self.returncode = returncode
        self.stderr = stderr
        last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "no reason given")
        super().__init__(f"git {' '.join(args[:2])} failed: {last}")


def run_git(
    cwd: str | Path,
    *args: str,
    input: bytes | str | None = None,
    text: bool = True,
    check: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[Any]:
    """Run ``git args...`` in ``cwd`` and return what it printed (stdout and stderr captured).

    Args:
        cwd: the folder to run it in (a worktree, or any folder for commands that need no repository).
        input: what to write to its standard input.
        text: decode its output as UTF-8 (undecodable bytes kept as surrogate escapes); False: bytes.
        check: raise :class:`GitFailed` on a non-zero exit status.
        env: variables to add to the environment git runs in.

    Raises:
        GitFailed: ``check`` is set and git failed.
    """
    extra = {"encoding": "utf-8", "errors": "surrogateescape"} if text else {}
    result = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True,
                            env=git_environment(**(env or {})), **extra)
    if check and result.returncode != 0:
        stderr = result.stderr if text else result.stderr.decode("utf-8", "replace")
        raise GitFailed(args, result.returncode, stderr)
    return result


def stream_git(cwd: str | Path, *args: str) -> Iterator[bytes]:
    """The standard output of ``git args...`` in ``cwd``, a NUL-separated record at a time, as git writes it.

    Nothing is read beyond what the caller takes: leaving the loop early ends git.
    """
    proc = subprocess.Popen(["git", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=git_environment())
    assert proc.stdout is not None
    try:
        pending = b""
        while True:
            chunk = proc.stdout.read1(1 << 16)
            if not chunk:
                break
            records = (pending + chunk).split(b"\x00")
            pending = records.pop()
            yield from records
        if pending:
            yield pending
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def feed_ids(pipe: IO[bytes], shas: list[bytes], folders: Mapping[bytes, bytes] | None = None) -> None:
    """Write object ids to a git command's input, a line each (with the folder of a tree, if known), then close it."""
    try:
        lines = []
        for sha in shas:
            hexsha = sha.hex().encode()
            folder = folders.get(hexsha) if folders else None
            lines.append(hexsha + b" " + folder + b"\n" if folder else hexsha + b"\n")
        pipe.write(b"".join(lines))
    except OSError:
        pass  # git ended early: its exit status says so
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def cat_file_batch(git_dir: str | Path, names: Sequence[str | bytes]) -> list[tuple[str, bytes] | None]:
    """Read objects with one ``git cat-file --batch``: (kind, data) of each name, or None for one git
    cannot find. A name is a binary id or anything git names an object by (``<commit>:<path>``...).

    The requests are written by a thread while the answers are read here, so
    neither side waits on a full pipe.
    """
    lines = [name.hex().encode() if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
             for name in names]
    proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=git_environment())
    assert proc.stdin is not None and proc.stdout is not None
    writer = threading.Thread(target=_write_lines, args=(proc.stdin, lines), daemon=True)
    writer.start()
    found: list[tuple[str, bytes] | None] = []
    try:
        for _ in lines:
            line = proc.stdout.readline()
            header = line.split()
            if not line:  # git ended
                break
            if line.endswith((b" missing\n", b" ambiguous\n")) or len(header) != 3:
                found.append(None)
                continue
            data = proc.stdout.read(int(header[2]) + 1)
            found.append((header[1].decode(), data[:-1]))
    finally:
        writer.join()
        proc.stdout.close()
        proc.wait()
    found += [None] * (len(lines) - len(found))
    return found


def _write_lines(pipe: IO[bytes], lines: list[bytes]) -> None:
    try:
        pipe.write(b"".join(line + b"\n" for line in lines))
    except OSError:
        pass  # git ended early: the reader sees it
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


class CatFile:
    """One ``git cat-file --batch`` kept running to read objects one at a time (those stored as deltas,
    or found only in an alternate), started at the first read. Safe to share between threads.
    """

    def __init__(self, git_dir: str | Path) -> None:
        self.git_dir = git_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def read(self, binsha: bytes) -> tuple[str, bytes]:
        """(kind, data) of the object ``binsha``.

        Raises:
            RepositoryError: git has no such object (or cannot be run).
        """
        with self._lock:
            for attempt in range(2):
                try:
                    return self._ask(binsha)
                except (OSError, ValueError) as exc:  # git ended (killed, or the repository moved): start it again
                    self._stop()
                    if attempt:
                        raise RepositoryError(f"git object {binsha.hex()} could not be read ({exc}); "
                                              "run 'git fsck'") from None
        raise AssertionError("unreachable")

    def _ask(self, binsha: bytes) -> tuple[str, bytes]:
        if self._proc is None:
            self._proc = subprocess.Popen(["git", f"--git-dir={self.git_dir}", "cat-file", "--batch"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          env=git_environment())
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(binsha.hex().encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        if not header:
            raise OSError("git cat-file ended")
        if len(header) != 3:
            raise RepositoryError(f"git object {binsha.hex()} is missing; run 'git fsck'")
        size = int(header[2])
        data = self._proc.stdout.read(size + 1)
        if len(data) != size + 1:
            raise OSError("git cat-file ended")
        return header[1].decode(), data[:-1]

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        """End git (it ends by itself once its input closes)."""
        with self._lock:
            self._stop()


__all__ = ["CatFile", "GitFailed", "cat_file_batch", "feed_ids", "run_git", "stream_git"]
