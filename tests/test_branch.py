"""Reads never write; a store writes to the branch it opened on, whatever a person checks out meanwhile."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsite import MemoryStore, RepositoryError
from memsite.api import storage_of
from memsite.foundation.record import short_id

from .conftest import assert_clean, git

ROOT = Path(__file__).resolve().parent.parent
SETPRIV = shutil.which("setpriv")
# Root ignores file modes; without these capabilities it obeys them like anyone else.
DROP = ["--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def cli(repo: Path, *args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memsite", "-C", str(repo), *args]
    if unprivileged:
        command = [str(SETPRIV), *DROP, *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(command, capture_output=True, text=True, env=env)


def make_writable(path: Path) -> None:
    subprocess.run(["chmod", "-R", "u+w", str(path)], check=True)


needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0,
                                   reason="needs setpriv, run as root, to drop the capabilities that ignore file modes")


@pytest.mark.slow
@needs_setpriv
def test_doctor_and_build_in_a_read_only_repository_say_so_in_one_line(store: MemoryStore, tmp_path: Path) -> None:
    """Someone else's checkout, opened to look: the doctor reports all it can without writing, and says the
    folder is read-only; build names where it cannot write; neither shows a traceback."""
    store.remember("Deploys freeze on Fridays", category="preferences")
    store.list()  # the derived files exist, WAL and all
    (store.root / ".git" / "index.lock").write_text("")  # a finding the doctor reports (not its to remove)
    subprocess.run(["chmod", "-R", "a-w", str(store.root)], check=True)
    try:
        doctor = cli(store.root, "doctor", unprivileged=True)
        fixing = cli(store.root, "doctor", "--fix", unprivileged=True)
        build = cli(store.root, "build", unprivileged=True)
        elsewhere = cli(store.root, "build", "--site-dir", str(tmp_path / "out"), unprivileged=True)
    finally:
        make_writable(store.root)
    assert doctor.returncode == 1 and "unexpected" not in doctor.stderr and "Traceback" not in doctor.stderr
    assert f"note: {store.root}, {store.root / '.git'}, {store.root / '.memsite'}: read-only for this user; " \
           "the doctor reports without writing anything" in doctor.stderr
    assert "problem: .git/index.lock: git lock file" in doctor.stderr
    assert doctor.stderr.strip().endswith("Error: 1 problem(s) found")
    assert fixing.returncode == 1 and "unexpected" not in fixing.stderr
    assert build.returncode == 1 and build.stderr == (
        f"Error: {store.root / 'site'}: cannot write the site there ({store.root} is read-only for this user); "
        "build it elsewhere with --site-dir DIR\n")
    assert elsewhere.returncode == 0 and (tmp_path / "out" / "index.html").exists()
    assert not (store.root / "site").exists()


@pytest.mark.slow
@needs_setpriv
@pytest.mark.parametrize("read_only", ["checkout", ".git"])
def test_reads_work_on_a_read_only_checkout_and_writes_name_the_read_only_folder(
        store: MemoryStore, tmp_path: Path, read_only: str) -> None:
    memory = store.remember("Deploys freeze on Fridays", category="preferences")
    if read_only == ".git":
        git(store.root, "config", "--unset", "core.splitIndex")  # a clone whose config memsite would still write
    shutil.rmtree(store.root / ".memsite")  # nothing derived yet: it has to be built somewhere else
    target = store.root if read_only == "checkout" else store.root / ".git"
    subprocess.run(["chmod", "-R", "a-w", str(target)], check=True)
    try:
        outputs = {args[2]: cli(store.root, *args, unprivileged=True) for args in
                   (["--agent", "planner", *rest] for rest in
                    (["list"], ["show", memory.id], ["recall", "Fridays"], ["core"],
                     ["build", "--site-dir", str(tmp_path / "site")]))}
        for name, result in outputs.items():
            assert result.returncode == 0, (name, result.stderr)
            assert "Traceback" not in result.stderr and "Error" not in result.stderr, (name, result.stderr)
        assert short_id(memory.id) in outputs["list"].stdout and "Deploys freeze on Fridays" in outputs["show"].stdout
        assert short_id(memory.id) in outputs["recall"].stdout and "Deploys freeze on Fridays" in outputs["core"].stdout
        assert (tmp_path / "site" / "index.html").exists()
        refused = cli(store.root, "remember", "Writes are refused here", unprivileged=True)
    finally:
        make_writable(target)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    expected = ".git/objects: is read-only" if read_only == "checkout" else "could not lock config file"
    assert expected in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert not (store.root / ".memsite").exists() or read_only == ".git"
    if read_only == ".git":
        assert git(store.root, "config", "--get", "core.splitIndex", check=False) == ""  # nothing written to .git
    assert len(git(store.root, "log", "--format=%H").split()) == 2


@pytest.mark.slow
def test_a_detached_head_is_read_at_its_commit_and_refuses_writes(store: MemoryStore) -> None:
    first = store.remember("The ledger runs Postgres 15", category="entities")
    second = store.remember("Billing moved to Stripe", category="entities")
    git(store.root, "checkout", "-q", "--detach", first.commit)
    listed = cli(store.root, "list")
    assert listed.returncode == 0 and short_id(first.id) in listed.stdout and short_id(second.id) not in listed.stdout
    refused = cli(store.root, "remember", "A memory on a detached HEAD")
    assert refused.returncode == 1
    assert f"HEAD is detached (at {first.commit[:12]})" in refused.stderr and "check out" in refused.stderr
    with MemoryStore(store.root, agent="planner", branch="main") as named:  # naming the branch writes there
        third = named.remember("Search runs on OpenSearch", category="entities")
    assert git(store.root, "rev-parse", "main").strip() == third.commit
    assert git(store.root, "rev-parse", "HEAD").strip() == first.commit
    assert git(store.root, "status", "--porcelain") == ""


@pytest.mark.slow
@pytest.mark.parametrize("operation", ["rebase", "merge"])
def test_reads_work_during_a_rebase_or_merge_and_writes_say_which(store: MemoryStore, operation: str) -> None:
    memory = store.remember("The ledger runs Postgres 15", category="entities")
    (store.root / "notes.txt").write_text("base\n")
    git(store.root, "add", "notes.txt")
    git(store.root, "commit", "-qm", "base")
    git(store.root, "checkout", "-q", "-b", "side")
    (store.root / "notes.txt").write_text("side\n")
    git(store.root, "commit", "-qam", "side")
    git(store.root, "checkout", "-q", "main")
    (store.root / "notes.txt").write_text("main\n")
    git(store.root, "commit", "-qam", "main")
    if operation == "rebase":
        git(store.root, "checkout", "-q", "side")
        git(store.root, "rebase", "main", check=False)
    else:
        git(store.root, "merge", "side", check=False)
    for args in (["list"], ["show", memory.id], ["recall", "Postgres"], ["core"]):
        result = cli(store.root, *args)
        assert result.returncode == 0 and "Error" not in result.stderr, (args, result.stderr)
    assert short_id(memory.id) in cli(store.root, "list").stdout
    refused = cli(store.root, "remember", "Not now")
    assert refused.returncode == 1
    assert f"a {operation} is in progress: finish it with git {operation} --continue or --abort" in refused.stderr
    with pytest.raises(RepositoryError, match=f"a {operation} is in progress"):
        store.remember("Not through the open store either")


def test_a_store_keeps_writing_to_its_branch_after_a_person_checks_out_another(store: MemoryStore) -> None:
    git(store.root, "checkout", "-q", "-b", "person")
    (store.root / "draft.md").write_text("a person's work\n")
    git(store.root, "add", "draft.md")
    git(store.root, "commit", "-qm", "draft")
    person = git(store.root, "rev-parse", "person").strip()
    memory = store.remember("Deploys freeze on Fridays", category="preferences")  # the store opened on main
    assert git(store.root, "rev-parse", "main").strip() == memory.commit
    assert git(store.root, "rev-parse", "person").strip() == person
    assert git(store.root, "status", "--porcelain", "--untracked-files=all") == ""  # files and index left alone
    assert not memory.path.exists()
    assert [m.id for m in store.list()] == [memory.id]  # the catalog follows main, not HEAD
    git(store.root, "checkout", "-q", "main")
    assert memory.path.exists()
    assert_clean(store.root)


def test_a_branch_checked_out_in_another_worktree_is_written_from_that_worktree_only(store: MemoryStore) -> None:
    """As git refuses to move a branch another worktree has checked out: written from here, the memory was
    missing from that worktree's index, and the person's next commit there deleted it."""
    root = store.root
    linked = root.parent / "linked"
    git(root, "worktree", "add", "-q", "-b", "agent/coder", str(linked))
    before = git(root, "rev-parse", "agent/coder")
    shown = re.escape(str(linked.resolve()))  # (git records the folder's real path)
    with MemoryStore(root, agent="coder", branch="agent/coder") as here:
        with pytest.raises(RepositoryError, match=rf"^agent/coder: is checked out in the worktree {shown}; write "
                                                  rf"to it from there \(MemoryStore\('{shown}'\)\), or to another"):
            here.remember("The coder agent works in the linked worktree", category="events")
    assert git(root, "rev-parse", "agent/coder") == before

    with MemoryStore(linked, agent="coder") as there:  # the linked worktree writes its own branch
        memory = there.remember("The coder agent works in the linked worktree", category="events")
        assert memory.path is not None and memory.path.is_relative_to(linked) and memory.path.exists()
    with MemoryStore(linked, agent="coder", branch="main") as there:  # and not the main worktree's
        with pytest.raises(RepositoryError, match=rf"^main: is checked out in the worktree {re.escape(str(root))}; "):
            there.remember("Never written to main from the linked worktree", category="events")
    assert git(linked, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(linked, "log", "-1", "--format=%s").strip() == \
           "Remember events: The coder agent works in the linked worktree"
    assert [m.id for m in store.list()] == []  # main is as it was

    shutil.rmtree(linked)  # removed without 'git worktree remove': git still counts it until pruned
    with MemoryStore(root, agent="coder", branch="agent/coder") as here:
        with pytest.raises(RepositoryError, match=r"; its folder is gone: run 'git worktree prune' \('git worktree "
                                                  r"unlock' first if it is locked\) to write to it here$"):
            here.remember("Written once the worktree is pruned", category="events")
        git(root, "worktree", "prune")
        here.remember("Written once the worktree is pruned", category="events")
    assert_clean(root)


def test_a_branch_another_worktree_is_rebasing_is_not_written_and_a_bare_repositorys_worktree_is(
        tmp_path: Path) -> None:
    """Worktrees of a bare repository (a common way to keep several): each writes its own branch, and the
    branch the bare repository's HEAD names is checked out nowhere; a branch another worktree is rebasing is
    refused, as git refuses it (the rebase would drop the memory)."""
    MemoryStore.init(tmp_path / "seed", agent="planner").close()
    bare = tmp_path / "memory.git"
    git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "seed"), str(bare))  # its HEAD: main
    first, second = tmp_path / "first", tmp_path / "second"
    git(bare, "worktree", "add", "-q", "-b", "planner", str(first))
    git(bare, "worktree", "add", "-q", "-b", "agent/coder", str(second))
    with MemoryStore(second, agent="coder") as coder:
        coder.remember("The coder agent keeps its own worktree", category="events")
    with MemoryStore(second, agent="coder", branch="main") as coder:  # main: in no worktree
        coder.remember("Written to main, which no worktree has", category="events")
    stopped = subprocess.run(["git", "rebase", "--exec", "false", "HEAD~1"], cwd=second, capture_output=True)
    assert stopped.returncode != 0 and (bare / "worktrees" / "second" / "rebase-merge").is_dir()
    with MemoryStore(first, agent="planner", branch="agent/coder") as planner:  # HEAD there is detached meanwhile
        with pytest.raises(RepositoryError, match=r"^agent/coder: is being rebased in the worktree .*second; write "
                                                  r"to it once that is done, or to another branch$"):
            planner.remember("Never written into a rebase", category="events")
    git(second, "rebase", "--abort")
    with MemoryStore(first, agent="planner") as planner:
        memory = planner.remember("The planner writes its branch from the first worktree", category="events")
        assert memory.path is not None and memory.path.is_relative_to(first)
    assert git(first, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(second, "status", "--porcelain", "--untracked-files=all") == ""
    assert git(bare, "log", "-1", "--format=%s", "agent/coder").strip() == \
           "Remember events: The coder agent keeps its own worktree"
    assert git(bare, "log", "-1", "--format=%s", "main").strip() == \
           "Remember events: Written to main, which no worktree has"


def test_a_large_transaction_to_a_branch_not_checked_out_writes_no_file(store: MemoryStore) -> None:
    git(store.root, "checkout", "-q", "-b", "person")
    with store.transaction("bulk import") as tx:  # the store opened on main
        for i in range(250):
            tx.remember(f"imported memory number {i}", category="events")
    assert len(git(store.root, "ls-tree", "-r", "--name-only", "main", "content/memories/events").split()) == 250
    assert git(store.root, "status", "--porcelain", "--untracked-files=all") == ""
    assert not (store.root / ".memsite" / "ahead").exists()  # nothing was written ahead for a tree not there
    git(store.root, "checkout", "-q", "main")
    assert len(list((store.root / "content" / "memories" / "events").rglob("*.md"))) == 250
    assert_clean(store.root)


def test_an_index_left_behind_by_a_racing_checkout_is_brought_forward(store: MemoryStore) -> None:
    git(store.root, "checkout", "-q", "-b", "person")  # (the same commit as main)
    first = store.remember("Deploys freeze on Fridays", category="preferences")  # main moves, by its ref alone
    # What 'git checkout main' leaves when it read main just before that write: the index and files of
    # the commit it read, then HEAD (and HEAD's reflog) written once it has released index.lock.
    git(store.root, "symbolic-ref", "-m", "checkout: moving from person to main", "HEAD", "refs/heads/main")
    assert git(store.root, "status", "--porcelain") != ""
    started = time.monotonic()
    second = store.remember("Billing moved to Stripe", category="entities")
    assert time.monotonic() - started < 5  # known at once: not waited for as a command under way
    assert first.path.exists() and second.path.exists()
    assert_clean(store.root)


def test_a_write_that_met_a_checkout_of_a_branch_with_the_same_tree_is_taken_back_out_of_it(
        store: MemoryStore) -> None:
    """git checkout writes HEAD after releasing index.lock: a write in between, to a branch whose tree is the
    same as the one being checked out, cannot tell the index apart and leaves its file staged there."""
    git(store.root, "branch", "person")  # the same tree as main
    person = git(store.root, "rev-parse", "person").strip()
    first = store.remember("Deploys freeze on Fridays", category="preferences")  # index and files of main...
    git(store.root, "symbolic-ref", "HEAD", "refs/heads/person")  # ...then the checkout's HEAD lands
    assert git(store.root, "status", "--porcelain") != ""  # the memory sits staged in the person's checkout
    second = store.remember("Billing moved to Stripe", category="entities")  # the next write takes it back out
    assert git(store.root, "status", "--porcelain", "--untracked-files=all") == ""
    assert not first.path.exists() and not second.path.exists()
    assert git(store.root, "rev-parse", "person").strip() == person
    assert git(store.root, "rev-parse", "main").strip() == second.commit
    git(store.root, "checkout", "-q", "main")
    assert first.path.exists() and second.path.exists()
    assert_clean(store.root)


def test_an_interrupted_write_is_not_repaired_into_another_branch(store: MemoryStore) -> None:
    git(store.root, "checkout", "-q", "-b", "person")
    mine = store.root / "content" / "memories" / "general" / "mine.md"
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("the person's own file, not committed yet\n")
    journal = storage_of(store).repo.state_dir / "journal.json"  # as a writer killed on main leaves it
    journal.write_text(json.dumps({"ref": "refs/heads/main", "paths": ["content/memories/general/mine.md"]}))
    store.remember("Deploys freeze on Fridays", category="preferences")
    assert mine.read_text() == "the person's own file, not committed yet\n"


@pytest.mark.slow
def test_an_agent_writing_in_a_loop_never_writes_to_the_branch_a_person_switches_to(store: MemoryStore,
                                                                                      tmp_path: Path) -> None:
    """No commit of the agent's lands on the person's branch, and no file of it stays there.

    ``git checkout`` reads the branch it leaves before it takes ``index.lock``:
    a write landing in between is carried into the other branch as a staged
    new file (git does that to any committer). Only such memory files may show
    in the person's checkout, and the next write takes them back out.
    """
    git(store.root, "checkout", "-q", "-b", "person")
    (store.root / "draft.md").write_text("a person's work\n")
    git(store.root, "add", "draft.md")
    git(store.root, "commit", "-qm", "draft")
    person = git(store.root, "rev-parse", "person").strip()
    git(store.root, "checkout", "-q", "main")
    start = tmp_path / "start"
    writer = subprocess.Popen([sys.executable, "-m", "tests.writer_process", str(store.root), "agent", "150",
                               "--start", str(start)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert writer.stdout is not None
    assert writer.stdout.readline() == "READY\n"  # the store opened on main (on a busy machine: not 0.5 s later)
    start.touch()
    switches = 0
    try:
        while writer.poll() is None:
            for branch in ("person", "main"):
                switched = subprocess.run(["git", "checkout", "-q", branch], cwd=store.root, capture_output=True)
                switches += switched.returncode == 0  # (refused while the writer holds index.lock)
                if branch == "person" and git(store.root, "rev-parse", "--abbrev-ref", "HEAD").strip() == "person":
                    for line in git(store.root, "status", "--porcelain", "--untracked-files=all").splitlines():
                        # carried over by the checkout ("AD": being taken back by the writer's next write)
                        assert line[:2] in ("A ", "AD") and line[3:].startswith("content/memories/events/"), line
                time.sleep(0.01)
    finally:
        out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    acked = [line.split()[1] for line in out.splitlines() if line.startswith("ACK ")]
    assert len(acked) == 150 and switches >= 5
    store.remember("written once the switching is over", category="events")  # takes back what the last write left
    assert git(store.root, "rev-parse", "person").strip() == person  # not one commit landed on person
    on_main = git(store.root, "log", "--format=%B", "main")
    assert all(f"Memory-Id: {mid}" in on_main for mid in acked)
    assert git(store.root, "status", "--porcelain", "--untracked-files=all") == ""
    git(store.root, "checkout", "-q", "main")
    assert_clean(store.root)
    git(store.root, "fsck", "--strict")
