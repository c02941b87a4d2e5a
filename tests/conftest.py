"""Shared fixtures: every test gets its own HOME and real git repositories in tmp_path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import settings

from memsite import MemoryStore
from memsite.api import storage_of

from .sites import memsite

# Hypothesis fails an example that takes over 200 ms: a timed assertion, and one a loaded 2-core machine
# fails at random (an example of 1 ms took 900 ms beside other work). Speed is measured in bench/.
settings.register_profile("memsite", deadline=None)
settings.load_profile("memsite")

START = datetime(2026, 11, 1, 9, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the real ~/.gitconfig, a MEMSITE_* setting of the machine or a git hook's GIT_* paths."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Person")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "person@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Person")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "person@example.com")
    for name in ("MEMSITE_AGENT", "MEMSITE_DIR", "MEMSITE_ENABLED", "MEMSITE_AUTO_LOAD_LINES",
                 # (set when the tests run from a git hook: they would point git elsewhere)
                 "GIT_INDEX_FILE", "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    # Recall by words only, as on a base install, whether or not wordllama is
    # installed here; tests of recall by meaning choose their embedder.
    monkeypatch.setenv("MEMSITE_EMBEDDING", "none")


class Clock:
    """A controllable clock: starts at START, moves only when told."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[MemoryStore]:
    """A fresh memory repository written by agent 'planner'."""
    with MemoryStore.init(tmp_path / "memory", agent="planner", clock=clock) as opened:
        # git gc, which memsite runs now and then, stays in the foreground so
        # no test checks the repository while a repack moves objects.
        git(opened.root, "config", "gc.autoDetach", "false")
        yield opened


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs: a full disk in seconds."""
    from . import faults

    try:
        mount = faults.mount_small_disk(tmp_path / "disk")
    except OSError as exc:
        pytest.skip(str(exc))
    try:
        yield mount
    finally:
        faults.unmount(mount)


def git(repo: Path, *args: str, check: bool = True) -> str:
    """Run git in ``repo`` and return its standard output."""
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def checkout(store: MemoryStore, *args: str) -> None:
    """``git checkout ARGS`` by a person, then ``store`` moved to that branch as a store opened now would be.

    (A store stays on the branch it opened on; this is the test's shortcut for reopening it.)
    """
    git(store.root, "checkout", *args)
    store.ref = storage_of(store).repo.refs.head_target()


def assert_clean(repo: Path) -> None:
    """git agrees with memsite: nothing uncommitted, index == HEAD, objects sound."""
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(repo, "diff-index", "--cached", "HEAD") == ""
    staged = sorted(line.split()[1] + " " + line.split("\t")[1] for line in git(repo, "ls-files", "-s").splitlines())
    committed = sorted(line.split()[2] + " " + line.split("\t")[1]
                       for line in git(repo, "ls-tree", "-r", "HEAD").splitlines())
    assert staged == committed
    while (repo / ".git" / "gc.pid").exists():  # a gc started by a killed writer
        time.sleep(0.05)
    fsck = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0 and "error" not in fsck.stderr, fsck.stderr
    assert git(repo, "cat-file", "-t", "HEAD^{tree}").strip() == "tree"
    # No git lock file or owner record left behind once writers are done.
    git_dir = repo / ".git"
    assert not (git_dir / "index.lock").exists()
    assert not list((git_dir / "refs").rglob("*.lock"))
    assert lock_records(repo) == []


def lock_records(repo: Path) -> list[str]:
    """The owner records left in ``.git/memsite-locks``, once a live writer has removed its own.

    A writer removes the records of its committed locks on a thread, just
    after each write: they are given a few seconds to go.
    """
    records = repo / ".git" / "memsite-locks"
    deadline = time.monotonic() + 10
    while True:
        left = sorted(p.name for p in records.iterdir()) if records.exists() else []
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.01)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


ROOT = Path(__file__).resolve().parent.parent


def start_writer(repo: Path, agent: str, count: int, *extra: str) -> subprocess.Popen[str]:
    """A writer process (``tests/writer_process.py``) of ``count`` memories as ``agent``."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.writer_process", str(repo), agent, str(count), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def acknowledged(output: str) -> dict[str, str]:
    """id -> commit of each memory a writer process acknowledged."""
    return {line.split()[1]: line.split()[2] for line in output.splitlines() if line.startswith("ACK ")}


def listed_packs(repo: Path) -> set[str]:
    """The packs on memsite's list (``.git/memsite-packs``), by name."""
    lines = (repo / ".git" / "memsite-packs").read_text().splitlines()
    return {line.split()[0] for line in lines if line.startswith("pack-")}


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Ctrl-C reaches this process and the processes it starts, as at a terminal. A shell running the
    suite in the background (``pytest &``) ignores it, which Python and its children then keep: these
    tests' Ctrl-C would never come."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's demo (``memsite demo``, a subprocess as a user runs it), made and built once for every test
    that only reads it: the site tests and the browser tests."""
    folder = tmp_path_factory.mktemp("demo") / "memory"
    result = memsite("demo", str(folder), home=tmp_path_factory.mktemp("home"))
    assert f"Site built into: {folder / 'site'}" in result.stdout and "serve --port 8000" in result.stdout
    return folder
