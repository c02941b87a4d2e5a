"""memsite.git.maintenance: merging memsite's own packs keeps every object git can read, leaves git's and a person's
packs alone, and stands back while git maintains the repository itself (a running gc, a multi-pack index).

(Deltas stored by git in the background, merges beside other writers: tests/test_git_settings.py.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsite.git import Entry, ObjectDatabase
from memsite.git.maintenance import GC_PID_STALE_SECONDS, gc_running
from memsite.git.objects import MODE_FILE
from memsite.git.settings import GitSettings

from .conftest import fsck, run, text


@pytest.fixture
def store(repo: Path) -> Iterator[ObjectDatabase]:
    objects = ObjectDatabase(repo / ".git" / "objects", GitSettings())
    try:
        yield objects
    finally:
        objects.close()


def pack_files(repo: Path) -> dict[str, bytes]:
    """name -> bytes of every pack file (and index, and .keep) in the repository."""
    folder = repo / ".git" / "objects" / "pack"
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def write_commits(repo: Path, objects: ObjectDatabase, count: int, start: int = 0) -> list[str]:
    """``count`` commits of one new file each, each commit's objects in one pack, branch main moved by git."""
    made = []
    for i in range(start, start + count):
        parent = text(repo, "rev-parse", "main").strip()
        root = bytes.fromhex(text(repo, "rev-parse", "main^{tree}").strip())
        with objects.batch():
            blob = objects.write(b"blob", b"memory %d\n" % i)
            tree = objects.apply(root, {f"memories/{i:03d}.md": Entry(MODE_FILE, blob)})
            assert tree is not None
            commit = objects.write(b"commit", b"tree %s\nparent %s\nauthor a <a@memsite.invalid> 1764230400 +0000\n"
                                              b"committer a <a@memsite.invalid> 1764230400 +0000\n\nmemory %d\n"
                                   % (tree.hex().encode(), parent.encode(), i))
        run(repo, "update-ref", "refs/heads/main", commit.hex(), parent)
        objects.release()
        made.append(commit.hex())
    return made


def all_objects(repo: Path) -> dict[str, str]:
    """id -> type of every object git finds, loose or packed."""
    out = run(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)").decode()
    return dict(line.split() for line in out.splitlines())


def test_merging_memsites_packs_keeps_every_object_and_leaves_gits_and_kept_packs_alone(repo: Path,
                                                                                      store: ObjectDatabase) -> None:
    run(repo, "repack", "-q", "-d")  # git's own pack
    gits = set(pack_files(repo))
    write_commits(repo, store, 3)
    kept = max((repo / ".git" / "objects" / "pack").glob("*.idx"), key=lambda p: p.stat().st_mtime_ns).stem
    (repo / ".git" / "objects" / "pack" / f"{kept}.keep").write_text("a person keeps this one\n")
    untouched = {name: data for name, data in pack_files(repo).items() if name in gits or name.startswith(kept)}
    assert len(untouched) == 5  # git's pack and index, memsite's kept pack, its index and .keep
    write_commits(repo, store, 20, start=3)
    before = all_objects(repo)
    count = len([name for name in pack_files(repo) if name.endswith(".pack")])
    store.maintenance.merge_own_packs()
    after_files = pack_files(repo)
    assert len([name for name in after_files if name.endswith(".pack")]) < count
    assert all(after_files.get(name) == data for name, data in untouched.items())  # byte for byte, still there
    assert all_objects(repo) == before
    for idx in (repo / ".git" / "objects" / "pack").glob("*.idx"):
        run(repo, "verify-pack", str(idx))
    assert text(repo, "log", "--format=%s", "-3").split("\n")[:3] == ["memory 22", "memory 21", "memory 20"]
    fsck(repo)


def test_nothing_is_merged_while_git_maintains_the_repository_itself(repo: Path, store: ObjectDatabase) -> None:
    write_commits(repo, store, 6)
    packs = pack_files(repo)
    run(repo, "multi-pack-index", "write")  # git's multi-pack index names the packs now: they are git's to manage
    store.maintenance.merge_own_packs()
    assert {name: data for name, data in pack_files(repo).items() if name in packs} == packs
    (repo / ".git" / "objects" / "pack" / "multi-pack-index").unlink()
    (repo / ".git" / "gc.pid").write_text(f"{os.getpid()} {socket.gethostname()}")  # a gc running here
    store.maintenance.merge_own_packs()
    assert {name: data for name, data in pack_files(repo).items() if name in packs} == packs
    (repo / ".git" / "gc.pid").unlink()
    store.maintenance.merge_own_packs()
    assert set(pack_files(repo)) != set(packs)
    fsck(repo)


@pytest.mark.parametrize("who", ["alive", "dead", "long ago", "another host", "garbled"])
def test_a_running_gc_is_recognised_exactly_when_git_itself_refuses_to_start_another(repo: Path, who: str) -> None:
    host = socket.gethostname()
    pid = os.getpid()
    if who == "dead":
        done = subprocess.Popen(["true"])
        done.wait()
        pid = done.pid
    content = {"another host": f"{pid} elsewhere.invalid", "garbled": "not a pid"}.get(who, f"{pid} {host}")
    gc_pid = repo / ".git" / "gc.pid"
    gc_pid.write_text(content)
    if who == "long ago":
        then = time.time() - GC_PID_STALE_SECONDS - 60
        os.utime(gc_pid, (then, then))
    memsite_sees = gc_running(repo / ".git")
    by_git = subprocess.run(["git", "gc", "--quiet"], cwd=repo, capture_output=True, text=True)
    git_refused = "already running" in by_git.stderr
    assert memsite_sees == git_refused, (who, by_git.stderr)
    assert memsite_sees == (who in ("alive", "another host"))
