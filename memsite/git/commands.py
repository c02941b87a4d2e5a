"""git itself, for what memsite leaves to it: :class:`Git` (a command, a log walk, a ``cat-file`` batch,
the configuration), :func:`merge_file`, and :class:`CatFile`, the ``git cat-file`` kept running to read
objects stored as deltas.

Every command runs with :func:`~memsite.git.settings.git_environment`, so
that what a hook running memsite set (``GIT_DIR``, ``GIT_INDEX_FILE``...)
never points it at another repository. Modules outside ``memsite.git`` run
git only through here (``tests/test_layers.py`` checks).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from ..foundation.errors import RepositoryError
from .settings import GitConfig, git_environment


class GitFailed(RepositoryError):
    """A git command ended with a non-zero exit status; ``stderr`` holds what it said."""

    def __init__(self, where: Path, args: Sequence[str], returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"git {' '.join(args[:2])} failed in {where}: {last_line(stderr)}")


def last_line(stderr: str, prefer: str = "") -> str:
    """What git said last (or its first line starting with ``prefer``), for a one-line message."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    chosen = next((line for line in lines if prefer and line.startswith(prefer)), lines[-1] if lines else "")
    return chosen or "no reason given"


class Git:
    """git itself, run in one folder: how every module outside ``memsite.git`` reaches git.

    Each command runs in :func:`~memsite.git.settings.git_environment` (what
    a hook running memsite set never points it at another repository), with
    its output captured. A :class:`~memsite.git.repo.Repository` has one as
    ``repo.git``; a folder that may not be a repository yet gets its own::

        Git(root).run("log", "-1", "--format=%H").stdout
        for record in Git(root).log("HEAD", "--format=%H", paths=["content"]): ...
        Git(root).cat_file(["HEAD:content/index.md"])

    Args:
        cwd: the folder git runs in (a worktree, or any folder for commands that need no repository).
        git_dir: a repository's git folder, passed as ``--git-dir`` (objects read without a worktree).
    """

    def __init__(self, cwd: str | os.PathLike[str], *, git_dir: str | os.PathLike[str] | None = None) -> None:
        self.cwd = Path(cwd)
        self._global = [f"--git-dir={git_dir}"] if git_dir is not None else []

    def __repr__(self) -> str:
        return f"Git({str(self.cwd)!r})"

    def run(
        self,
        *args: str,
        input: bytes | str | None = None,
        text: bool = True,
        check: bool = False,
        env: Mapping[str, str] | None = None,
        capture: bool = True,
        idle: bool = False,
    ) -> subprocess.CompletedProcess[Any]:
        """Run ``git args...`` to its end; its exit status, and its output and errors captured.

        Args:
            input: what to write to its standard input.
            text: output as text (UTF-8, undecodable bytes kept as surrogate escapes); False: bytes.
            check: raise :class:`GitFailed` when git fails.
            env: variables to add to its environment (an author's name and date, say).
            capture: False: its output goes nowhere (for a command that may leave a process running
                behind it, as ``git gc --auto`` detaches: a pipe would be waited on until that ends).
            idle: at the lowest priority (``nice``), with what it leaves running: background maintenance
                takes the time writers and syncs leave.

        Raises:
            GitFailed: ``check`` is set and git failed (its message names the command, the folder and
                git's last line of error).
        """
        extra: dict[str, Any] = {"encoding": "utf-8", "errors": "surrogateescape"} if text else {}
        output = subprocess.PIPE if capture else subprocess.DEVNULL
        nice = ["nice", "-n", "19"] if idle and shutil.which("nice") else []
        result = subprocess.run([*nice, "git", *self._global, *args], cwd=self.cwd, input=input, stdout=output,
                                stderr=output, env=git_environment(**(env or {})), **extra)
        if check and result.returncode != 0:
            stderr = (result.stderr if text else result.stderr.decode("utf-8", "replace")) if capture else ""
            raise GitFailed(self.cwd, args, result.returncode, stderr)
        return result

    def stream(self, *args: str, sep: bytes = b"\n") -> Iterator[bytes]:
        """The output of ``git args...`` a record at a time (records end with ``sep``), read as git writes it.

        Nothing is read beyond what the caller takes: leaving the loop early
        ends git. What git says on error is dropped; an empty output is all
        a failure shows.
        """
        proc = subprocess.Popen(["git", *self._global, *args], cwd=self.cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=git_environment())
        assert isinstance(proc.stdout, io.BufferedReader)  # (a buffered pipe: read1 returns what is there)
        try:
            pending = b""
            while True:
                chunk = proc.stdout.read1(1 << 16)
                if not chunk:
                    break
                *records, pending = (pending + chunk).split(sep)
                yield from records
            if pending:
                yield pending
        finally:
            proc.stdout.close()
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def log(self, revision: str, *options: str, paths: Sequence[str] = (), sep: bytes = b"\n") -> Iterator[bytes]:
        """``git log options... revision -- paths...``, a record at a time (see :meth:`stream`).

        Args:
            revision: where the walk starts (``HEAD``, ``a..b``).
            options: git log's options (``--format=...``, ``--name-only``, ``--grep=...``).
            paths: only commits that touched these.
            sep: what ends a record (the format's own end mark, or ``\\0`` with ``-z``).
        """
        return self.stream("log", *options, revision, "--", *paths, sep=sep)

    def cat_file(self, names: Sequence[str | bytes]) -> list[tuple[str, bytes] | None]:
        """(kind, data) of each object, from one ``git cat-file --batch``; None for one git cannot find.

        A name is a binary id or anything git names an object by
        (``<commit>:<path>``). The requests are written on a thread while the
        answers are read here, so neither side waits on a full pipe.

        Raises:
            GitFailed: git could not run here (not a repository).
        """
        lines = [name.hex().encode() if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")
                 for name in names]
        if not lines:
            return []
        proc = subprocess.Popen(["git", *self._global, "cat-file", "--batch"], cwd=self.cwd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=git_environment())
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
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
            stderr = proc.stderr.read().decode("utf-8", "replace")
            proc.stderr.close()
            proc.wait()
        if proc.returncode != 0:
            raise GitFailed(self.cwd, ("cat-file", "--batch"), proc.returncode, stderr)
        return found + [None] * (len(lines) - len(found))

    def config(self) -> GitConfig:
        """git's configuration here, every level (system, global, this clone), read now.

        Raises:
            GitFailed: git could not read it (a config file it cannot parse).
        """
        result = self.run("config", "-z", "--list", "--show-scope", text=False)
        if result.returncode != 0:
            raise GitFailed(self.cwd, ("config", "--list"), result.returncode, result.stderr.decode("utf-8", "replace"))
        return GitConfig.parse(result.stdout)

    def toplevel(self) -> Path | None:
        """The top folder of the worktree ``cwd`` is in, or None when it is in none."""
        result = self.run("rev-parse", "--show-toplevel")
        return Path(result.stdout.strip()) if result.returncode == 0 and result.stdout.strip() else None


def merge_file(ours: Path, base: Path, theirs: Path, *, labels: tuple[str, str, str] = ("ours", "base", "theirs"),
               in_place: bool = True) -> tuple[bytes, bool]:
    """Merge three versions of a file line by line, as git merges a file with no driver (``git merge-file``).

    Needs no repository. ``in_place``: the result (conflict markers and all)
    replaces ``ours``, and the bytes returned are empty; otherwise ``ours``
    is left as it is and the result is returned.

    Returns:
        (the merged bytes, whether the merge was clean).
    """
    options = ["-L", labels[0], "-L", labels[1], "-L", labels[2]]
    result = subprocess.run(["git", "merge-file", *([] if in_place else ["-p"]), *options,
                             str(ours), str(base), str(theirs)], capture_output=True, env=git_environment())
    return result.stdout, result.returncode == 0


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
            try:
                return self._ask(binsha)
            except (OSError, ValueError):  # git ended (killed, or its pipe broke): start it again, once
                self._stop()
            try:
                return self._ask(binsha)
            except (OSError, ValueError) as exc:
                self._stop()
                raise RepositoryError(f"git object {binsha.hex()} could not be read ({exc}); run 'git fsck'") from None

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


__all__ = ["CatFile", "Git", "GitFailed", "feed_ids", "merge_file"]
