"""Many writers at once, and writers killed at every step: nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.foundation.errors import RepositoryError
from memsite.foundation.fileformat import parse_memory

from .conftest import Clock, acknowledged, assert_clean, git, listed_packs, start_writer
from .faults import working
from .writer_process import KILL_POINTS

pytestmark = pytest.mark.slow  # many writer processes, killed at random moments


def assert_all_present(repo: Path, acks: dict[str, str]) -> None:
    with MemoryStore(repo, agent="checker") as store:
        stored = {m.id for m in store.list()}
        missing = set(acks) - stored
        assert not missing, f"acknowledged but lost: {sorted(missing)}"
        branch = subprocess.run(["git", "rev-list", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.split()
        assert set(acks.values()) <= set(branch)


def assert_no_partial_files(repo: Path) -> None:
    # os.walk, not rglob: a detached 'git gc' may be removing empty object folders meanwhile.
    leftovers = [name for folder, dirs, names in os.walk(repo) for name in names if name.endswith(".memsite-tmp")]
    assert not leftovers
    memories = repo / "content" / "memories"
    for path in memories.rglob("*.md"):
        parse_memory(path.read_text(), str(path), category=path.relative_to(memories).parts[0])


def run_together(writers: list[tuple[Path, str, int]], *options: str) -> dict[str, str]:
    """Start writer processes (checkout, agent, count), release them at once, and return what they acknowledged."""
    start = writers[0][0] / ".memsite" / "go"
    procs = [start_writer(where, agent, count, "--start", str(start), *options) for where, agent, count in writers]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "READY\n"  # every store is open
    start.touch()
    acks: dict[str, str] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        acks.update(acknowledged(out))
    return acks


def test_many_processes_writing_at_once_lose_nothing(store: MemoryStore) -> None:
    acks = run_together([(store.root, f"agent{i}", 20) for i in range(6)])
    assert len(acks) == 120
    assert_all_present(store.root, acks)
    assert len(store.list()) == 120
    assert len(set(acks.values())) == 120  # one commit per write
    assert_clean(store.root)


def test_processes_writing_transactions_at_once_lose_nothing(store: MemoryStore) -> None:
    acks = run_together([(store.root, f"batcher{i}", 40) for i in range(3)], "--batch", "8")
    assert len(acks) == 120 and len(set(acks.values())) == 15
    assert_all_present(store.root, acks)
    assert_clean(store.root)


def test_writers_in_two_linked_worktrees_share_one_list_of_packs_and_lose_none(store: MemoryStore,
                                                                               tmp_path: Path) -> None:
    root = store.root
    git(root, "config", "gc.autoPackLimit", "4")  # memsite merges its packs every two: merges often overlap writes
    git(root, "config", "pack.writeReverseIndex", "true")  # git's own packs get a .rev file; memsite's never do
    other = tmp_path / "second-checkout"
    git(root, "worktree", "add", "-q", "-b", "second", str(other))
    acks = run_together([(where, f"{where.name}-{i}", 15) for where in (root, other) for i in range(2)])
    assert len(acks) == 60
    listed = listed_packs(root)
    folder = root / ".git" / "objects" / "pack"
    # Every pack either checkout wrote is on the one list (none dropped by a merge in the other); one
    # off it is git's own, from the 'git gc --auto' memsite runs now and then (it may hold objects a
    # write stored loose while that gc ran, without deltas: the .rev file tells git's packs apart).
    for pack in {path.stem for path in folder.glob("*.idx")} - listed:
        assert (folder / f"{pack}.rev").exists(), pack
    for where, branch in ((root, "HEAD"), (other, "second")):
        with MemoryStore(where, agent="checker") as reader:
            assert len(reader.list()) == 30
        assert set(acks.values()) & set(git(root, "rev-list", branch).split())
    assert_clean(root)
    assert_clean(other)


def test_threads_sharing_a_store_and_threads_with_their_own(store: MemoryStore) -> None:
    results: list[str] = []
    errors: list[BaseException] = []

    def write(target: MemoryStore, name: str) -> None:
        try:
            for i in range(10):
                results.append(target.remember(f"{name} thread memory {i}", category="events").id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    own = [MemoryStore(store.root, agent=f"own{i}") for i in range(3)]
    threads = [threading.Thread(target=write, args=(store, f"shared{i}")) for i in range(3)]
    threads += [threading.Thread(target=write, args=(s, f"own{i}")) for i, s in enumerate(own)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for s in own:
        s.close()
    assert not errors
    assert sorted(results) == sorted(m.id for m in store.list())
    assert len(results) == 60
    assert_clean(store.root)


@pytest.mark.parametrize(("point", "batch"), [
    (point, 1) for point in sorted(KILL_POINTS) if point not in ("files-written-ahead", "file-placed")] + [
    # A commit of many files writes most of them ahead, while it stages the rest, and the working tree
    # on a second thread: killed there too.
    (point, 150) for point in ("files-written-ahead", "file-placed", "file-written", "index-lock-held", "ref-moved",
                               "index-done")])
def test_a_writer_killed_at_any_step_leaves_a_usable_repository(store: MemoryStore, point: str, batch: int) -> None:
    before = store.remember("written before the crash", category="events")
    writer = start_writer(store.root, "victim", max(3, batch), "--kill-at", point, "--batch", str(batch))
    out, _ = writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    acks = acknowledged(out)
    assert not acks  # killed inside its first write, before acknowledging it
    # The next writer is not blocked, repairs what was left, and loses nothing.
    after = store.remember("written after the crash", category="events")
    assert_all_present(store.root, {before.id: before.commit, after.id: after.commit})  # type: ignore[dict-item]
    assert_no_partial_files(store.root)
    assert_clean(store.root)
    assert storage_of(store).repo.journal.pending() == []  # nothing left to repair


def test_writers_killed_at_random_moments_lose_no_acknowledged_write(store: MemoryStore) -> None:
    rng = random.Random(20261122)
    acks: dict[str, str] = {}
    for round_ in range(8):
        writer = start_writer(store.root, f"victim{round_}", 400, *(["--batch", "5"] if round_ % 2 else []))
        first = working(writer)
        time.sleep(rng.uniform(0.05, 0.6))
        writer.send_signal(signal.SIGKILL)
        out, _ = writer.communicate(timeout=60)
        acks.update(acknowledged(first + out))
        store.remember(f"survivor {round_}", category="events")
        assert_all_present(store.root, acks)
        assert_no_partial_files(store.root)
        assert_clean(store.root)
    assert len(acks) > 8


def test_an_index_update_the_killed_writer_left_running_cannot_touch_the_live_index(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a dead writer's 'git update-index' finishing after recovery left 'AD' entries.

    memsite now runs it on a private copy of the index, so an orphan of it
    changes only that copy, whenever it finishes.
    """
    from memsite.git import worktree
    from memsite.git.objects import blob_id

    memory = store.remember("a memory to change", category="events")
    environments: list[dict[str, str] | None] = []
    popen = subprocess.Popen

    def spy(args: list[str], **options: object) -> subprocess.Popen[bytes]:
        if "update-index" in args:
            environments.append(options.get("env"))  # type: ignore[arg-type]
        return popen(args, **options)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(worktree.subprocess, "Popen", spy)
    # A change the split index's fast path leaves to git (a file removed from the base coming back, say):
    monkeypatch.setattr(worktree.gitindex, "update_files", lambda *args: worktree.gitindex.NOT_APPLICABLE)
    store.update(memory.id, content="a changed memory")  # 'git update-index' runs
    monkeypatch.undo()
    assert len(environments) == 1
    rel = "content/memories/events/half-written-abcdef.md"
    data = b"---\nid: 01JD3X4K9Q2W8E5R7T6Y1V3A0P\n---\n\nnever committed\n"
    (store.root / rel).write_bytes(data)
    subprocess.run(["git", "hash-object", "-w", rel], cwd=store.root, check=True, capture_output=True)
    storage_of(store).repo.journal.begin([rel])  # what the killed writer had journaled
    # Its orphaned 'git update-index' (which had hashed the file), run as memsite runs it, finishing late:
    orphan = subprocess.Popen(
        ["sh", "-c", f"sleep 0.5; git update-index --add --cacheinfo 100644,{blob_id(data).hex()},{rel}"],
        cwd=store.root, env=environments[0],
    )
    store.remember("the next write recovers", category="events")
    assert orphan.wait() == 0
    assert not (store.root / rel).exists()
    assert_clean(store.root)


def hold_memory_lock(repo: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process holding the repository lock for ``seconds`` (prints 'held' once it does)."""
    code = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(float(sys.argv[2]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(repo / ".memsite" / "lock"), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_write_waits_for_the_memory_lock_and_gives_up_after_its_timeout(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memsite.git.repo as gitrepo

    holder = hold_memory_lock(store.root, 1.0)
    start = time.monotonic()
    memory = store.remember("written once the other process let go", category="events")
    waited = time.monotonic() - start
    holder.wait()
    assert memory.commit is not None and 0.5 < waited < 10

    monkeypatch.setattr(gitrepo, "LOCK_TIMEOUT_SECONDS", 0.3)
    holder = hold_memory_lock(store.root, 1.0)
    with pytest.raises(RepositoryError, match="another writer held the memory lock"):
        store.remember("never written", category="events")
    holder.wait()  # the wait that gave up gets the lock when the holder ends, and lets it go again
    assert store.remember("written after the timeout", category="events").commit is not None
    assert [m.abstract for m in store.list(category="events")] == ["written once the other process let go",
                                                                  "written after the timeout"]
    assert_clean(store.root)


def test_without_fcntl_the_memory_lock_is_filelocks_and_still_keeps_processes_apart(
    store: MemoryStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where Python has no fcntl (Windows), the memory lock is filelock's: here filelock's flock, so this checks
    that memsite falls back to it and waits and gives up as with its own lock, not filelock's Windows lock."""
    import memsite.git.mutex as mutex
    import memsite.git.repo as gitrepo

    monkeypatch.setattr(mutex, "fcntl", None)
    with MemoryStore(store.root, agent="coder", clock=clock) as portable:
        holder = hold_memory_lock(store.root, 1.0)
        start = time.monotonic()
        portable.remember("written once the other process let go", category="events")
        waited = time.monotonic() - start
        holder.wait()
        assert 0.5 < waited < 10

        monkeypatch.setattr(gitrepo, "LOCK_TIMEOUT_SECONDS", 0.3)
        holder = hold_memory_lock(store.root, 1.0)
        with pytest.raises(RepositoryError, match="another writer held the memory lock"):
            portable.remember("never written", category="events")
        holder.wait()
        portable.remember("written after the timeout", category="events")
    assert [m.abstract for m in store.list(category="events")] == ["written once the other process let go",
                                                                  "written after the timeout"]
    assert_clean(store.root)


def test_a_memory_lock_file_removed_under_a_running_store_still_keeps_writers_apart(store: MemoryStore) -> None:
    """'.memsite/' is git-ignored, so 'git clean -X' may remove the lock file a long-lived store keeps open:
    its next write must lock the file the path names now, the one other processes lock."""
    store.remember("before the clean", category="events")
    (store.root / ".memsite" / "lock").unlink()
    holder = hold_memory_lock(store.root, 1.0)
    start = time.monotonic()
    store.remember("after the clean", category="events")
    waited = time.monotonic() - start
    holder.wait()
    assert waited > 0.5  # it waited for the other process, rather than writing beside it
    assert_clean(store.root)
