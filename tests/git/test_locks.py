"""memsite.git.locks: memsite's lock files and git's exclude each other, with git's own commands on the other side.

(Writers killed holding a lock, reused pids, file systems without hard links: tests/test_git_locks.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memsite.foundation.errors import RepositoryError
from memsite.git import locks
from memsite.git.locks import Locks

from .conftest import commit_files, fsck, run, text

ROOT = Path(__file__).resolve().parents[2]


def git_fails(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    assert result.returncode != 0, f"git {' '.join(args)} ran while memsite held the lock"
    return result.stderr


def test_while_memsite_holds_the_index_and_a_ref_git_commands_that_need_them_fail_and_then_see_its_content(
        repo: Path) -> None:
    git_dir = repo / ".git"
    head = text(repo, "rev-parse", "HEAD").strip()
    later = text(repo, "commit-tree", "HEAD^{tree}", "-p", head, "-m", "later").strip()
    taken = Locks(git_dir, repo)
    index, ref = taken.acquire(git_dir / "index"), taken.acquire(git_dir / "refs" / "heads" / "main")
    (repo / "new.md").write_text("new\n")
    assert "index.lock" in git_fails(repo, "add", "new.md")
    assert "index.lock" in git_fails(repo, "checkout", "-q", "-b", "other")
    assert "cannot lock ref" in git_fails(repo, "update-ref", "refs/heads/main", later, head)
    assert taken.describe(index.path) == locks.LockState(locks.LIVE, locks.current_owner())
    # The new content goes in by a rename, as git's own commit of a lock does.
    ref.write(f"{later}\n".encode())
    ref.commit()
    index.rollback()
    assert text(repo, "rev-parse", "main").strip() == later
    assert not (git_dir / "index.lock").exists() and not (git_dir / "refs" / "heads" / "main.lock").exists()
    run(repo, "add", "new.md")  # git takes the index again
    taken.close()  # the records of committed locks, and the files they replaced, go
    assert not list((git_dir / locks.RECORDS_DIR).iterdir())
    fsck(repo)


def test_a_lock_a_running_git_command_holds_is_waited_for_never_taken(repo: Path) -> None:
    """``git update-ref --stdin`` with a prepared transaction holds ``refs/heads/main.lock`` until told to go on."""
    head = text(repo, "rev-parse", "HEAD").strip()
    later = text(repo, "commit-tree", "HEAD^{tree}", "-p", head, "-m", "later").strip()
    person = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=repo, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert person.stdin is not None and person.stdout is not None
    person.stdin.write(f"start\nupdate refs/heads/main {later} {head}\nprepare\n")
    person.stdin.flush()
    assert person.stdout.readline() == "start: ok\n" and person.stdout.readline() == "prepare: ok\n"
    git_lock = repo / ".git" / "refs" / "heads" / "main.lock"
    assert git_lock.exists()
    taken = Locks(repo / ".git", repo, timeout=0.3)
    assert taken.describe(git_lock).state == locks.FOREIGN
    assert not taken.take_back(git_lock)
    with pytest.raises(RepositoryError, match=r"^\.git/refs/heads/main\.lock is held by another git process; "
                                              r"memsite waited 0\.3 s"):
        taken.acquire(repo / ".git" / "refs" / "heads" / "main")
    assert git_lock.exists()
    # Waiting longer: git finishes its transaction meanwhile, and memsite takes the lock after it.
    patient = Locks(repo / ".git", repo, timeout=30)
    finish = threading.Timer(0.3, lambda: (person.stdin.write("commit\n"), person.stdin.close()))  # type: ignore[union-attr]
    finish.start()
    started = time.monotonic()
    lock = patient.acquire(repo / ".git" / "refs" / "heads" / "main")
    try:
        assert time.monotonic() - started >= 0.2
        assert person.wait(10) == 0
        assert text(repo, "rev-parse", "main").strip() == later  # git's update landed, untouched by memsite
    finally:
        lock.rollback()
        finish.join()
    assert text(repo, "rev-parse", "main").strip() == later


KILLED_HOLDING = """
import os, signal, sys
from pathlib import Path
from memsite.git.locks import Locks
git_dir = Path(sys.argv[1])
lock = Locks(git_dir, git_dir.parent).acquire(git_dir / "index")
lock.write(b"half written")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_memsite_writers_index_lock_stops_git_until_memsite_takes_it_back(repo: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_HOLDING, str(repo / ".git")], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode < 0, proc.stderr
    (repo / "new.md").write_text("new\n")
    assert "index.lock" in git_fails(repo, "add", "new.md")  # git cannot tell it is stale
    taken = Locks(repo / ".git", repo)
    assert taken.describe(repo / ".git" / "index.lock").state == locks.DEAD
    taken.sweep()
    assert not (repo / ".git" / "index.lock").exists()
    assert not list((repo / ".git" / locks.RECORDS_DIR).iterdir())
    commit_files(repo, {"new.md": b"new\n"})  # git's index was never touched: it goes on from it
    assert text(repo, "status", "--porcelain") == ""
    fsck(repo)
