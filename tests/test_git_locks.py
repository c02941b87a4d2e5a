"""memsite beside people who use plain git: it waits for their lock files and never deletes them.

Every test runs real git commands in a real repository: a commit whose
pre-commit hook is slow, a ``git commit -a`` waiting in its editor, lock files
left by a memsite writer killed with SIGKILL, and lock files memsite knows
nothing about.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.foundation.errors import RepositoryError

from .conftest import Clock, assert_clean, git, lock_records

pytestmark = pytest.mark.slow  # git commands holding locks beside memsite writers, in processes

ROOT = Path(__file__).resolve().parent.parent


def set_lock_timeout(root: Path, seconds: float) -> None:
    """Set the memsite plugin's lock_timeout in mkdocs.yml and commit it."""
    settings = root / "mkdocs.yml"
    text = settings.read_text()
    assert "  memsite:\n" in text
    settings.write_text(text.replace("  memsite:\n", f"  memsite:\n    lock_timeout: {seconds}\n", 1))
    git(root, "commit", "-q", "-am", "Shorter lock timeout")


@pytest.fixture
def quick_store(tmp_path: Path, clock: Clock) -> Iterator[MemoryStore]:
    """A memory repository whose writes give up on someone else's git lock after one second."""
    MemoryStore.init(tmp_path / "memory", agent="planner", clock=clock).close()
    set_lock_timeout(tmp_path / "memory", 1)
    with MemoryStore(tmp_path / "memory", agent="planner", clock=clock) as opened:
        git(opened.root, "config", "gc.autoDetach", "false")
        assert storage_of(opened).repo.lock_timeout == 1
        yield opened


def wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def committed_paths(root: Path) -> set[str]:
    return set(git(root, "ls-tree", "-r", "--name-only", "HEAD").splitlines())


@pytest.mark.parametrize("how", ["commit -a", "plain commit", "editor after reset --soft"])
def test_a_commit_with_a_slow_pre_commit_hook_and_memsite_writes_both_land(store: MemoryStore, how: str) -> None:
    """Regression: memsite moved the branch under the person's commit, which then failed
    with "cannot lock ref 'HEAD': is at <memsite's commit> but expected <old>".

    ``git commit -a`` (and ``git commit <paths>``) hold index.lock while the
    hook runs. A plain ``git commit`` of staged changes writes the index
    (vouching for its new tree) and releases it before its hooks: a write
    meanwhile took that index for a branch switch and moved the branch alone.
    A commit redoing one undone with ``git reset --soft`` waits in its editor.
    """
    root = store.root
    (root / "by-hand.txt").write_text("written by a person\n")
    git(root, "add", "by-hand.txt")
    env = dict(os.environ)
    if how == "editor after reset --soft":
        git(root, "commit", "-q", "-m", "A file by hand")
        git(root, "reset", "-q", "--soft", "HEAD~1")
        time.sleep(0.05)  # (a person's next command, a clock tick or more later)
        editor = root / ".git" / "slow-editor"
        editor.write_text('#!/bin/sh\ntouch .git/hook-running\nsleep 2\necho "A file by hand" > "$1"\n')
        editor.chmod(0o755)
        env["GIT_EDITOR"] = str(editor)
        command = ["git", "commit", "-q"]
    else:
        hook = root / ".git" / "hooks" / "pre-commit"
        hook.write_text("#!/bin/sh\ntouch .git/hook-running\nsleep 2\n")
        hook.chmod(0o755)
        if how == "commit -a":
            (root / "content" / "index.md").write_text("# Changed by a person\n")
        command = ["git", "commit", *(["-a"] if how == "commit -a" else []), "-q", "-m", "A file by hand"]
    person = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(root / ".git" / "hook-running")
    # Only 'commit -a' holds index.lock while its hook runs; a plain commit leaves nothing but the index.
    assert (root / ".git" / "index.lock").exists() == (how == "commit -a")
    started = time.monotonic()
    memories = [store.remember(f"observed while a person commits, number {i}", category="events", dedupe=False)
                for i in range(3)]
    waited = time.monotonic() - started
    _, err = person.communicate(timeout=30)
    assert person.returncode == 0, err
    assert waited > 1.0  # the first write waited for the person's commit instead of moving the branch
    paths = committed_paths(root)
    assert "by-hand.txt" in paths
    for memory in memories:
        assert memory.path is not None and memory.path.relative_to(root).as_posix() in paths
    log = git(root, "log", "--format=%an: %s").splitlines()
    assert len(log) == 5 and log[3] == "Test Person: A file by hand", log  # before memsite's three writes
    assert_clean(root)


HOOK = f"""#!/bin/sh
cd content && PYTHONPATH={ROOT} {sys.executable} -m memsite --agent hook remember \\
    "$(basename $0) saw: $(git log -1 --format=%s)" -c events > ../.git/$(basename $0).out 2>&1
echo $? >> ../.git/$(basename $0).out
exit 0
"""


@pytest.mark.parametrize("how", ["commit -a", "plain commit", "partial commit"])
def test_a_write_from_a_pre_commit_hook_fails_at_once_and_one_from_post_commit_lands(
        store: MemoryStore, how: str) -> None:
    """A pre-commit hook's write would wait for the commit that waits for the hook: it is refused at once,
    the person's commit goes through, and a post-commit hook's write lands after it (the hooks run
    memsite from a subfolder, where git's GIT_INDEX_FILE, relative to the top, does not resolve)."""
    root = store.root
    for name in ("pre-commit", "post-commit"):
        (root / ".git" / "hooks" / name).write_text(HOOK)
        (root / ".git" / "hooks" / name).chmod(0o755)
    (root / "by-hand.txt").write_text("written by a person\n")
    git(root, "add", "by-hand.txt")
    if how == "partial commit":  # 'git commit <path>' with something else staged: it stays staged
        (root / "staged.txt").write_text("staged, not committed yet\n")
        git(root, "add", "staged.txt")
    git(root, "commit", "-q", "-m", "A file by hand",
        *{"commit -a": ["-a"], "plain commit": [], "partial commit": ["--", "by-hand.txt"]}[how])

    refused = (root / ".git" / "pre-commit.out").read_text().splitlines()
    assert refused[-1] == "1" and len(refused) == 2, refused
    assert f"{root}: cannot write from a hook of the 'git commit' running there (GIT_INDEX_FILE=" in refused[0]
    assert refused[0].endswith("): its commit lands after the hook returns; write from a post-commit hook instead "
                               "(nothing was written)")
    assert (root / ".git" / "post-commit.out").read_text().splitlines()[-1] == "0"
    assert git(root, "log", "--format=%an: %s", "-2").splitlines() == \
           ["hook: Remember events: post-commit saw: A file by hand", "Test Person: A file by hand"]
    assert [m.abstract for m in store.list()] == ["post-commit saw: A file by hand"]
    if how == "partial commit":
        assert git(root, "status", "--porcelain") == "A  staged.txt\n"  # the person's staged file is still theirs
        git(root, "commit", "-q", "--no-verify", "-m", "The staged file")
    assert_clean(root)


def test_a_hook_of_another_repository_writing_here_is_not_taken_for_one_of_this_repository(
        quick_store: MemoryStore, tmp_path: Path) -> None:
    """A project's commit hook writing to the memory repository: its GIT_INDEX_FILE (relative) names the
    project's index. The memory repository has a commit pending of its own (refused by its hook a moment
    ago): the write waits for it as any write does, then goes through, rather than being refused."""
    memory = quick_store.root
    (memory / "by-hand.txt").write_text("written by a person\n")
    git(memory, "add", "by-hand.txt")
    (memory / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (memory / ".git" / "hooks" / "pre-commit").chmod(0o755)
    assert subprocess.run(["git", "commit", "-q", "-m", "Refused"], cwd=memory, capture_output=True).returncode == 1
    project = tmp_path / "project"
    git(tmp_path, "init", "-q", str(project))
    (project / ".git" / "hooks" / "pre-commit").write_text(
        f"#!/bin/sh\nPYTHONPATH={ROOT} {sys.executable} -m memsite -C {memory} --agent hook remember "
        f"'A project commit was made' -c events > .git/hook.out 2>&1\necho $? >> .git/hook.out\n")
    (project / ".git" / "hooks" / "pre-commit").chmod(0o755)
    git(project, "commit", "-q", "--allow-empty", "-m", "Project work")
    assert (project / ".git" / "hook.out").read_text().splitlines()[-1] == "0"
    assert [m.abstract for m in quick_store.list()] == ["A project commit was made"]
    assert git(memory, "status", "--porcelain").splitlines() == ["A  by-hand.txt"]  # still the person's


@pytest.mark.parametrize("named", ["index.lock", "other-index"])
def test_an_index_named_in_the_environment_that_no_running_commit_holds_does_not_stop_writes(
        quick_store: MemoryStore, monkeypatch: pytest.MonkeyPatch, named: str) -> None:
    """A process a commit hook left running keeps GIT_INDEX_FILE; a script may name an index of its own."""
    monkeypatch.setenv("GIT_INDEX_FILE", str(quick_store.root / ".git" / named))
    memory = quick_store.remember("written with GIT_INDEX_FILE set", category="events")
    assert memory.commit is not None
    monkeypatch.delenv("GIT_INDEX_FILE")  # (git itself would read that index)
    assert_clean(quick_store.root)


def test_a_write_after_a_commit_its_hook_refused_joins_the_staged_changes(quick_store: MemoryStore) -> None:
    """A refused commit leaves the index vouching for a tree no commit has: after waiting, the write goes
    into that index as into any with changes staged, so the person's next commit keeps the memory."""
    root = quick_store.root
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint failed' >&2\nexit 1\n")
    hook.chmod(0o755)
    (root / "by-hand.txt").write_text("written by a person\n")
    git(root, "add", "by-hand.txt")
    refused = subprocess.run(["git", "commit", "-q", "-m", "A file by hand"], cwd=root, capture_output=True, text=True)
    assert refused.returncode != 0 and "lint failed" in refused.stderr
    started = time.monotonic()
    memory = quick_store.remember("written after a refused commit", category="events")
    assert time.monotonic() - started > 0.5  # until the index was lock_timeout old: a commit might have been under way
    assert memory.commit is not None and memory.path is not None and memory.path.exists()
    rel = memory.path.relative_to(root).as_posix()
    assert git(root, "status", "--porcelain", "--untracked-files=all").splitlines() == ["A  by-hand.txt"]
    hook.unlink()  # the person fixes what the hook refused and commits again
    git(root, "commit", "-q", "-m", "A file by hand")
    paths = committed_paths(root)
    assert {"by-hand.txt", rel} <= paths  # the memory is kept, not deleted by the person's commit
    assert quick_store.get(memory.id).content == "written after a refused commit"
    assert_clean(root)


@pytest.mark.parametrize("whose", ["a person's", "memsite's", "a person's, then a checkout"])
def test_a_staged_undo_of_the_last_commit_is_the_persons_to_commit(quick_store: MemoryStore, whose: str) -> None:
    """Regression: a file the last commit added, removed again and staged (its commit refused by a hook),
    makes the index the tree of an older commit; a write took that for an index a racing checkout
    left behind, put the file back and unstaged the removal."""
    root = quick_store.root
    if whose == "memsite's":
        added = quick_store.remember("the memory a person removes by hand", category="events")
        assert added.path is not None
        rel = added.path.relative_to(root).as_posix()
    else:
        rel = "by-hand.txt"
        (root / rel).write_text("written by a person\n")
        git(root, "add", rel)
        git(root, "commit", "-q", "-m", "Add a file by hand")
        if whose.endswith("checkout"):  # HEAD's reflog then ends as a racing checkout leaves it
            git(root, "checkout", "-q", "-b", "side")
            git(root, "checkout", "-q", "main")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    git(root, "rm", "-q", rel)
    assert subprocess.run(["git", "commit", "-q", "-m", "Remove it"], cwd=root, capture_output=True).returncode != 0
    old = time.time() - 60  # the refused commit was a minute ago: no command can be under way still
    os.utime(root / ".git" / "index", (old, old))
    started = time.monotonic()
    memory = quick_store.remember("written while the removal is staged", category="events")
    assert time.monotonic() - started < 0.9  # (lock_timeout: 1 s) not waited for
    assert not (root / rel).exists()
    assert git(root, "status", "--porcelain", "--untracked-files=all").splitlines() == [f"D  {rel}"]
    hook.unlink()
    git(root, "commit", "-q", "-m", "Remove it")
    paths = committed_paths(root)
    assert rel not in paths and memory.path is not None and memory.path.relative_to(root).as_posix() in paths
    assert_clean(root)


def test_a_write_after_git_reset_soft_goes_in_at_once_and_leaves_the_undo_staged(store: MemoryStore) -> None:
    """'git reset --soft HEAD~1' moves the branch and leaves the index of the commit it undid: no git command
    is pending on it (the branch moved after the index was written), so the write does not wait."""
    root = store.root
    (root / "by-hand.txt").write_text("written by a person\n")
    git(root, "add", "by-hand.txt")
    git(root, "commit", "-q", "-m", "A file by hand")  # git's index vouches for its tree
    git(root, "reset", "-q", "--soft", "HEAD~1")
    started = time.monotonic()
    memory = store.remember("written just after the reset", category="events")
    assert time.monotonic() - started < 5  # (lock_timeout: 10 s) not waited for
    assert git(root, "status", "--porcelain").splitlines() == ["A  by-hand.txt"]
    assert memory.path is not None and memory.path.relative_to(root).as_posix() in committed_paths(root)
    git(root, "commit", "-q", "-m", "The file again")
    assert_clean(root)


@pytest.mark.parametrize("message", ["being written", "left by the last commit"])
def test_an_index_older_than_the_branch_is_waited_for_only_while_a_commit_message_is_written(
        quick_store: MemoryStore, message: str) -> None:
    """After 'git reset --soft', a 'git commit' that finds the index unchanged does not write it: what git
    writes before its editor and commit-msg hook is COMMIT_EDITMSG, newer than the branch while it runs."""
    root = quick_store.root
    (root / "by-hand.txt").write_text("written by a person\n")
    git(root, "add", "by-hand.txt")
    git(root, "commit", "-q", "-m", "A file by hand")
    git(root, "reset", "-q", "--soft", "HEAD~1")
    branch = (root / ".git" / "refs" / "heads" / "main").stat().st_mtime
    os.utime(root / ".git" / "index", (branch - 0.3, branch - 0.3))  # as the reset left it: older than the branch
    edited = time.time() if message == "being written" else branch - 0.2  # (a commit in its editor wrote it)
    os.utime(root / ".git" / "COMMIT_EDITMSG", (edited, edited))
    started = time.monotonic()
    memory = quick_store.remember("written after a reset --soft", category="events")
    waited = time.monotonic() - started
    # (lock_timeout: 1 s, then written through; a wait for the message left 0.2 s before the branch moved: 0.8 s)
    assert waited > 0.9 if message == "being written" else waited < 0.5, waited
    assert git(root, "status", "--porcelain").splitlines() == ["A  by-hand.txt"]  # the person's to commit
    assert memory.path is not None and memory.path.relative_to(root).as_posix() in committed_paths(root)


def test_a_commit_waiting_in_its_editor_makes_memsite_fail_clearly_and_is_left_alone(
    quick_store: MemoryStore, tmp_path: Path
) -> None:
    root = quick_store.root
    editor = tmp_path / "slow-editor"
    editor.write_text(f"#!/bin/sh\ntouch {tmp_path}/editing\nsleep 3\necho 'Edited by hand' > \"$1\"\n")
    editor.chmod(0o755)
    (root / "content" / "index.md").write_text("# Changed by a person\n")
    person = subprocess.Popen(["git", "commit", "-a"], cwd=root, env={**os.environ, "GIT_EDITOR": str(editor)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(tmp_path / "editing")
    before = git(root, "rev-parse", "HEAD")
    with pytest.raises(RepositoryError) as failure:
        quick_store.remember("written while a person is in the editor", category="events")
    message = str(failure.value)
    assert message.startswith(".git/index.lock is held by another git process (a commit waiting for its editor?); "
                              "memsite waited 1 s.")
    assert "remove the file only if no git command is running" in message
    assert (root / ".git" / "index.lock").exists()  # never deleted
    assert git(root, "rev-parse", "HEAD") == before  # nothing committed
    _, err = person.communicate(timeout=30)
    assert person.returncode == 0, err
    assert git(root, "log", "-1", "--format=%s").strip() == "Edited by hand"
    assert not list((root / "content" / "memories").rglob("*.md"))  # the refused write left no file
    later = quick_store.remember("written once the person is done", category="events")
    assert later.commit is not None
    assert_clean(root)


LOCK_AND_DIE = """
import os, signal, sys
from pathlib import Path
from memsite.git import locks
from memsite.git.locks import Locks
locks._HAS_PROC = locks._HAS_PROC and sys.argv[4] == "proc"
git_dir = Path(sys.argv[1])
lock = Locks(git_dir, git_dir.parent).acquire(git_dir / sys.argv[2])
if sys.argv[3] == "renamed":  # killed after the rename, before its record was removed
    target = git_dir / sys.argv[2]
    lock.write(target.read_bytes())
    os.replace(lock.path, target)
else:
    lock.write(b"half written")
os.kill(os.getpid(), signal.SIGKILL)
"""


def kill_while_holding(root: Path, target: str, when: str = "holding", proc_fs: bool = True) -> Path:
    """Run a memsite process that takes ``.git/<target>.lock`` and is killed holding it (or just after).

    ``proc_fs=False``: the process runs as where there is no ``/proc`` (its record has no start time).
    """
    proc = subprocess.run([sys.executable, "-c", LOCK_AND_DIE, str(root / ".git"), target, when,
                           "proc" if proc_fs else "none"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    lock = root / ".git" / f"{target}.lock"
    assert lock.exists() == (when == "holding")
    return lock


@pytest.mark.parametrize("target", ["index", "refs/heads/main"])
def test_a_lock_left_by_a_killed_memsite_writer_is_taken_back_by_the_next_write(
    store: MemoryStore, target: str
) -> None:
    lock = kill_while_holding(store.root, target)
    memory = store.remember("written after a writer was killed holding a lock", category="events")
    assert not lock.exists()
    assert memory.path is not None and memory.path.relative_to(store.root).as_posix() in committed_paths(store.root)
    assert_clean(store.root)  # the index is sound and no owner record is left


def test_the_record_of_a_writer_killed_just_after_renaming_its_lock_is_dropped(store: MemoryStore) -> None:
    kill_while_holding(store.root, "refs/heads/main", "renamed")
    records = store.root / ".git" / "memsite-locks"
    assert len(list(records.iterdir())) == 1
    store.remember("written after the writer died", category="events")
    assert lock_records(store.root) == []
    assert_clean(store.root)


def test_a_replaced_file_left_by_a_writer_on_another_host_is_removed_once_old(store: MemoryStore,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from memsite.git import locks

    records = store.root / ".git" / "memsite-locks"
    records.mkdir(exist_ok=True)
    # What a writer on another machine sharing the repository left: its liveness cannot be told.
    left = records / "refs%2Fheads%2Fmain.lock+4242+123+another-host+7.old"
    os.link(store.root / ".git" / "refs" / "heads" / "main", left)
    store.remember("a write while it is recent", category="events")
    assert left.exists()
    monkeypatch.setattr(locks, "OLD_SECONDS", -1.0)  # as if linked longer ago than that
    store.remember("a write once it is old", category="events")
    assert not left.exists()
    assert_clean(store.root)


def test_a_dead_writers_lock_that_cannot_be_moved_aside_to_be_checked_is_left_in_place(
        quick_store: MemoryStore) -> None:
    """Taking back a dead writer's lock moves it aside first, to check it is still that writer's file
    (another process may have taken the lock since); one that cannot be moved is never removed unchecked."""
    lock = kill_while_holding(quick_store.root, "refs/heads/main")
    [record] = list((quick_store.root / ".git" / "memsite-locks").iterdir())
    blocker = record.with_name(record.name + ".taken")  # where it would be moved: a folder is in the way
    blocker.mkdir()
    (blocker / "kept").touch()
    with pytest.raises(RepositoryError, match=r"^\.git/refs/heads/main\.lock is held by memsite process \d+ "):
        quick_store.remember("written beside a lock that cannot be checked", category="events")
    assert lock.exists()
    (blocker / "kept").unlink()
    blocker.rmdir()
    quick_store.remember("written once it can be", category="events")
    assert not lock.exists()
    assert_clean(quick_store.root)


def test_a_reused_pid_does_not_make_a_dead_writers_lock_look_alive(store: MemoryStore) -> None:
    lock = kill_while_holding(store.root, "refs/heads/main")
    records = store.root / ".git" / "memsite-locks"
    [record] = list(records.iterdir())
    key, _, started, host, n = record.name.split("+")
    # The dead writer's pid now belongs to a live process (this one), started at another time.
    record.rename(records / f"{key}+{os.getpid()}+{int(started) - 1 if started != '-' else 1}+{host}+{n}")
    store.remember("written after the pid was reused", category="events")
    assert not lock.exists()
    assert_clean(store.root)


def without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this process tell liveness as where there is no /proc (macOS, the BSDs): with signal 0."""
    from memsite.git import locks

    monkeypatch.setattr(locks, "_HAS_PROC", False)
    monkeypatch.setattr(locks, "_me", None)  # this process's record is made again, without a start time


def test_without_proc_a_dead_writers_lock_is_taken_back(quick_store: MemoryStore,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    without_proc(monkeypatch)
    lock = kill_while_holding(quick_store.root, "refs/heads/main", proc_fs=False)
    [record] = list((quick_store.root / ".git" / "memsite-locks").iterdir())
    assert record.name.split("+")[2] == "-"  # no start time where /proc is missing
    quick_store.remember("written after a writer was killed, without /proc", category="events")
    assert not lock.exists()
    assert_clean(quick_store.root)


@pytest.mark.parametrize("name", ["index.lock", "refs/heads/main.lock"])
def test_a_lock_memsite_did_not_create_is_never_removed(quick_store: MemoryStore, name: str) -> None:
    lock = quick_store.root / ".git" / name
    lock.touch()  # a git command's lock: no owner record
    before = git(quick_store.root, "rev-parse", "HEAD")
    with pytest.raises(RepositoryError, match=rf"^\.git/{name} is held by another git process.*waited 1 s"):
        quick_store.remember("written beside a foreign lock", category="events")
    assert lock.exists()
    assert git(quick_store.root, "rev-parse", "HEAD") == before
    assert git(quick_store.root, "status", "--porcelain") == ""  # nothing of the refused write is left
    lock.unlink()  # the person finds no git running and removes it
    quick_store.remember("written once it is gone", category="events")
    assert_clean(quick_store.root)


@pytest.mark.parametrize("proc", [True, False], ids=["/proc", "without /proc"])
def test_a_lock_held_by_a_live_memsite_process_is_waited_for_not_taken(
        quick_store: MemoryStore, monkeypatch: pytest.MonkeyPatch, proc: bool) -> None:
    from memsite.git.locks import Locks

    if not proc:
        without_proc(monkeypatch)

    git_dir = quick_store.root / ".git"
    held = Locks(git_dir, quick_store.root).acquire(git_dir / "index")  # this process: alive
    try:
        with pytest.raises(RepositoryError, match=rf"^\.git/index\.lock is held by memsite process {os.getpid()} "):
            quick_store.remember("written while another memsite writer holds the index", category="events")
        assert held.path.exists()
    finally:
        held.rollback()
    quick_store.remember("written once it is released", category="events")
    assert_clean(quick_store.root)


def test_on_a_file_system_without_hard_links_writes_still_take_git_locks(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: object, **kwargs: object) -> None:
        raise PermissionError("hard links are not supported here")

    monkeypatch.setattr(os, "link", no_links)
    memory = store.remember("written where hard links are refused", category="events")
    assert memory.path is not None and memory.path.relative_to(store.root).as_posix() in committed_paths(store.root)
    assert_clean(store.root)
