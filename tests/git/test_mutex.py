"""memsite.git.mutex: the repository lock between processes is held while its holder lives, freed by the kernel when
it dies, handed over when released, and follows a lock file someone replaced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memsite.git.mutex import LockTimeout, ProcessLock, SharedLock

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sys, time
from pathlib import Path
from memsite.git.mutex import ProcessLock
lock = ProcessLock(Path(sys.argv[1]))
lock.acquire(10)
print("held", flush=True)
sys.stdin.readline()  # until told
lock.release()
print("released", flush=True)
time.sleep(60)
"""


def holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_the_lock_is_held_while_its_holder_lives_handed_over_on_release_and_freed_when_it_dies(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    other = holder(path)
    lock = ProcessLock(path)
    try:
        with pytest.raises(LockTimeout):
            lock.acquire(0.2)
        with pytest.raises(LockTimeout):
            lock.acquire(0)
        started = time.monotonic()
        threading.Timer(0.3, lambda: (other.stdin.write("go\n"), other.stdin.flush())).start()  # type: ignore[union-attr]
        lock.acquire(10)  # waits in the kernel, and has it the moment the other lets go
        assert 0.2 <= time.monotonic() - started < 5
        lock.acquire(1)  # re-entrant
        lock.release()
        lock.release()
    finally:
        other.kill()
        other.wait()
    killed = holder(path)
    try:
        with pytest.raises(LockTimeout):
            lock.acquire(0.1)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        lock.acquire(2)  # the kernel freed it with its holder
        lock.release()
    finally:
        killed.kill()
        killed.wait()
    lock.close()


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_a_lock_file_removed_while_held_is_not_shared_by_two_holders(tmp_path: Path) -> None:
    """'git clean -X' may remove the git-ignored lock file: the next holder locks the file the path names now."""
    path = tmp_path / "lock"
    first = ProcessLock(path)
    first.acquire(1)
    path.unlink()
    other = holder(path)  # locks a new file at the path
    try:
        second = ProcessLock(path)
        with pytest.raises(LockTimeout):
            second.acquire(0.2)  # the new file's holder excludes it, whatever the old file's lock
        second.close()
    finally:
        other.kill()
        other.wait()
        first.release()
        first.close()


def test_a_shared_lock_excludes_threads_and_says_whether_it_was_taken(tmp_path: Path) -> None:
    lock = SharedLock(tmp_path / "shared")
    assert lock.acquire(0)
    taken: list[bool] = []
    waiter = threading.Thread(target=lambda: taken.append(lock.acquire(0.1)))
    waiter.start()
    waiter.join()
    assert taken == [False]
    lock.release()
    assert lock.acquire(0)
    lock.release()
    lock.close()
