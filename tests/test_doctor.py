"""``memsite doctor``: it reports what faults and hand edits leave, repairs what is safe, never another's lock."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.cli import main

from .conftest import assert_clean, git, lock_records


def doctor(repo: Path, *args: str):
    return CliRunner().invoke(main, ["-C", str(repo), "--agent", "doctor", "doctor", *args])


def test_a_healthy_repository_has_no_problems(store: MemoryStore) -> None:
    store.remember("The staging cluster is vega")
    result = doctor(store.root)
    assert result.exit_code == 0, result.output
    assert result.output == "no problems found\n"


def test_what_a_killed_writer_leaves_is_reported_then_repaired(store: MemoryStore) -> None:
    memory = store.remember("The staging cluster is vega")
    root = store.root
    store.close()
    dead = 2**22 + 12345  # above the kernel's default pid_max: no process has it
    orphans = [root / "content" / f".x.md.{dead}.memsite-tmp",
               root / ".git" / "objects" / "ab" / f"tmp_obj_{dead}_1",
               root / ".memsite" / "ahead" / f".7.{dead}.memsite-tmp"]  # a file a large commit wrote ahead
    for path in orphans:
        path.parent.mkdir(exist_ok=True)
    for path in orphans:
        path.write_bytes(b"half written")
    alive = root / "content" / f".y.md.{os.getpid()}.memsite-tmp"  # a writer still running: left alone
    alive.write_bytes(b"being written")
    gits_own = root / ".git" / "objects" / "ab" / "tmp_obj_Xa9Qz1"
    gits_own.write_bytes(b"git's")
    (root / ".git" / "index").unlink()
    (root / ".memsite" / "catalog.sqlite3").write_bytes(b"garbage" * 1000)
    result = doctor(root)
    assert result.exit_code == 1
    assert f"content/.x.md.{dead}.memsite-tmp: temporary file of a memsite writer (process {dead})" in result.output
    assert f"tmp_obj_{dead}_1" in result.output and "tmp_obj_Xa9Qz1" not in result.output
    assert f".memsite/ahead/.7.{dead}.memsite-tmp: temporary file of a memsite writer" in result.output
    assert f"note: content/.y.md.{os.getpid()}.memsite-tmp: being written" in result.output
    assert "problem: .git/index: missing" in result.output
    assert "problem: .memsite/catalog.sqlite3: damaged" in result.output
    assert result.output.endswith("Error: 5 problem(s) found (5 repaired by 'memsite doctor --fix')\n")
    fixed = doctor(root, "--fix")
    assert fixed.exit_code == 0, fixed.output
    assert not any(path.exists() for path in orphans)
    assert alive.exists() and gits_own.exists()
    assert "note: .memsite/catalog.sqlite3.damaged-" in fixed.output
    alive.unlink()
    gits_own.unlink()
    assert_clean(root)
    with MemoryStore(root, agent="planner") as again:
        assert [m.id for m in again.list()] == [memory.id]


def test_a_pack_kept_by_a_killed_writer_is_reported_and_released(store: MemoryStore) -> None:
    for n in range(3):
        store.remember(f"Service {n} listens on port {9000 + n}", category="entities")
    root = store.root
    store.close()
    packs = sorted((root / ".git" / "objects" / "pack").glob("pack-*.pack"))
    assert len(packs) >= 3
    dead = 2**22 + 12345  # above the kernel's default pid_max: no process has it
    keeps = {who: pack.with_suffix(".keep") for who, pack in zip(("dead", "alive", "git"), packs)}
    keeps["dead"].write_text(f"memsite {dead}: until its branch moves\n")  # a writer killed before it let go
    keeps["alive"].write_text(f"memsite {os.getpid()}: until its branch moves\n")
    keeps["git"].write_text("receive-pack 4242 on build-host\n")  # git's own: never memsite's to remove
    result = doctor(root)
    assert result.exit_code == 1
    rel = keeps["dead"].relative_to(root)
    assert f"problem: {rel}: kept by memsite process {dead}, which was stopped before its branch moved" in result.output
    assert result.output.count(".keep") == 1
    fixed = doctor(root, "--fix")
    assert fixed.exit_code == 0, fixed.output
    assert not keeps["dead"].exists() and keeps["alive"].exists() and keeps["git"].exists()


def test_a_lock_file_is_reported_and_never_removed(store: MemoryStore) -> None:
    store.remember("The staging cluster is vega")
    lock = store.root / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    for args in ((), ("--fix",)):
        result = doctor(store.root, *args)
        assert result.exit_code == 1
        assert "problem: .git/refs/heads/main.lock: git lock file" in result.output
        assert "memsite never removes it: if no git process is running, rm .git/refs/heads/main.lock" in result.output
        assert lock.exists()


def test_memsites_own_lock_left_by_a_killed_writer_is_taken_back_and_a_foreign_one_is_not(store: MemoryStore) -> None:
    store.remember("The staging cluster is vega")
    root = Path(__file__).resolve().parent.parent
    killed = subprocess.Popen([sys.executable, "-m", "tests.writer_process", str(store.root), "agent", "1",
                               "--kill-at", "git-lock-taken"], cwd=root, stdout=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": str(root)})
    assert killed.wait() == -9
    owned = store.root / ".git" / "index.lock"
    assert owned.exists()
    foreign = store.root / ".git" / "refs" / "heads" / "main.lock"  # as a git command holds it
    foreign.write_text("")
    result = doctor(store.root)
    assert result.exit_code == 1
    assert f"problem: .git/index.lock: memsite's own lock left by a killed writer (pid {killed.pid})" in result.output
    assert "problem: .git/refs/heads/main.lock: git lock file" in result.output and "not memsite's" in result.output
    assert result.output.endswith("Error: 2 problem(s) found (1 repaired by 'memsite doctor --fix')\n")
    fixed = doctor(store.root, "--fix")
    assert "took back .git/index.lock, left by a killed memsite writer" in fixed.output
    assert not owned.exists() and foreign.exists()
    assert lock_records(store.root) == []  # its owner record went with it
    foreign.unlink()
    assert doctor(store.root).exit_code == 0
    assert_clean(store.root)


def test_an_interrupted_write_and_a_stale_catalog_are_repaired(store: MemoryStore) -> None:
    memory = store.remember("The staging cluster is vega")
    assert memory.path is not None
    rel = memory.path.relative_to(store.root).as_posix()
    storage_of(store).repo.journal.begin([rel])  # as a writer killed mid-commit leaves it
    memory.path.write_text("half written")
    (store.root / "content" / "by-hand.md").write_text("A page a person added\n")
    git(store.root, "add", "content/by-hand.md")
    git(store.root, "commit", "-qm", "a commit made by hand", "--", "content/by-hand.md")
    store.close()
    result = doctor(store.root)
    assert result.exit_code == 1
    assert "problem: .memsite/journal.json: a write was interrupted with 1 file(s)" in result.output
    assert "problem: .memsite/catalog.sqlite3: indexes " in result.output
    fixed = doctor(store.root, "--fix")
    assert fixed.exit_code == 0, fixed.output
    assert "repair: put back the files a write left out of line with the checked-out branch" in fixed.output
    assert_clean(store.root)


def test_a_write_left_in_a_checkout_of_another_branch_is_reported_and_taken_back(store: MemoryStore) -> None:
    git(store.root, "branch", "person")  # the same tree as main
    memory = store.remember("Deploys freeze on Fridays", category="preferences")
    git(store.root, "symbolic-ref", "HEAD", "refs/heads/person")  # the checkout's HEAD lands after the write
    found = doctor(store.root)
    assert found.exit_code == 1
    assert "1 file(s) a write to refs/heads/main left staged in this checkout of refs/heads/person" in found.output
    fixed = doctor(store.root, "--fix")
    assert "put back the files a write left out of line" in fixed.output
    assert not memory.path.exists() and git(store.root, "status", "--porcelain") == ""
    assert doctor(store.root).exit_code == 0


def test_bad_files_and_copies_need_a_person_and_misplaced_memories_move(store: MemoryStore) -> None:
    first = store.remember("The staging cluster is vega", category="general")
    second = store.remember("Deploys happen on Tuesdays", category="general")
    assert first.path is not None and second.path is not None
    shutil.copy(first.path, first.path.with_name("copy.md"))
    second.path.write_text(second.path.read_text().replace("active_count: 0", "active_count: lots"))
    flat = store.remember("Backups run nightly", category="events")
    assert flat.path is not None
    git(store.root, "mv", str(flat.path), str(flat.path.parent.parent.parent / flat.path.name))  # the flat layout
    git(store.root, "add", "-A")
    git(store.root, "commit", "-qm", "edited by people")
    store.close()
    result = doctor(store.root, "--fix")
    assert result.exit_code == 1
    assert "repair: moved 1 memory files to numbered folders of their month in commit " in result.output
    assert "field 'active_count'" in result.output
    assert (f"the-staging-cluster-is-vega-{first.id[-6:].lower()}.md: field 'id': {first.id} is also the id of "
            in result.output)
    assert "Error: 2 problem(s) found\n" in result.output
    assert "in the flat layout" not in result.output.split("repair: moved")[1]
    assert_clean(store.root)
