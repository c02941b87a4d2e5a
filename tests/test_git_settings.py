"""memsite writes objects, refs and the index itself: it must do what git would do in the same repository.

sha256 repositories are refused, reflogs follow core.logAllRefUpdates,
core.fsync decides what is flushed, reused objects are freshened against
``git gc``, a commit's objects go into one pack (merged by memsite, loose
when git's maintenance is off), and caches belong to one repository each.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import subprocess
import sys
import time
from collections import OrderedDict
from pathlib import Path
from urllib.parse import unquote

import pytest

from memsite import MemoryStore
from memsite.api import storage_of
from memsite.features import history
from memsite.foundation.config import DEFAULT_CATEGORIES
from memsite.foundation.errors import RepositoryError
from memsite.git import index as gitindex
from memsite.git.settings import GitSettings, parse_fsync
from memsite.git.worktree import IndexUpdate

from .conftest import Clock, acknowledged, assert_clean, git, listed_packs, start_writer


def listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("how", ["open", "init"])
def test_a_sha256_repository_is_refused_before_anything_is_written(tmp_path: Path, how: str) -> None:
    repo = tmp_path / "memory"
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(repo)], check=True)
    if how == "open":  # a memory repository someone converted: settings and files present
        (repo / "mkdocs.yml").write_text("site_name: m\nextra:\n  memsite: {}\n")
    before = listing(repo)
    with pytest.raises(RepositoryError) as failure:
        if how == "open":
            MemoryStore(repo, agent="planner")
        else:
            MemoryStore.init(repo, agent="planner")
    assert str(failure.value) == f"{repo}: memsite supports SHA-1 repositories; this one uses sha256"
    assert listing(repo) == before
    assert git(repo, "rev-parse", "--show-object-format").strip() == "sha256"


def reflog(root: Path, name: str) -> Path:
    return root / ".git" / "logs" / name


def test_reflogs_follow_core_log_all_ref_updates(store: MemoryStore, clock: Clock) -> None:
    root = store.root
    memory = store.remember("the default writes reflogs, as git does", category="events")
    for name in ("refs/heads/main", "HEAD"):
        assert reflog(root, name).read_text().splitlines()[-1].split()[1] == memory.commit
    assert git(root, "reflog", "show", "main").splitlines()[0].startswith(memory.commit[:7])  # type: ignore[index]

    # false: a reflog that exists is still appended to; a missing one is not created (git's rule).
    git(root, "config", "core.logAllRefUpdates", "false")
    reflog(root, "HEAD").unlink()
    with MemoryStore(root, agent="planner", clock=clock) as reopened:
        second = reopened.remember("with logAllRefUpdates false", category="events")
    assert not reflog(root, "HEAD").exists()
    assert second.commit in reflog(root, "refs/heads/main").read_text()
    assert git(root, "reflog", "show", "main").splitlines()[0].startswith(second.commit[:7])  # type: ignore[index]

    reflog(root, "refs/heads/main").unlink()
    with MemoryStore(root, agent="planner", clock=clock) as reopened:
        reopened.remember("no reflog created", category="events")
    assert not reflog(root, "refs/heads/main").exists()

    git(root, "config", "core.logAllRefUpdates", "always")
    with MemoryStore(root, agent="planner", clock=clock) as reopened:
        third = reopened.remember("always: created again", category="events")
    assert third.commit in reflog(root, "refs/heads/main").read_text()
    assert third.commit in reflog(root, "HEAD").read_text()

    git(root, "config", "--unset", "core.logAllRefUpdates")  # unset (as in a bare repository's worktrees): git's
    reflog(root, "HEAD").unlink()                             # default with a working tree, reflogs, is kept
    with MemoryStore(root, agent="planner", clock=clock) as reopened:
        fourth = reopened.remember("unset: created as by default", category="events")
    assert fourth.commit in reflog(root, "HEAD").read_text()
    assert_clean(root)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names flushed files through /proc")
def test_core_fsync_decides_what_memsite_flushes(store: MemoryStore, clock: Clock,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    flushed: list[str] = []

    def fsync(fd: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{fd}"))

    monkeypatch.setattr(os, "fsync", fsync)
    store.remember("git 2.39 flushes no loose object, ref or index by default", category="events")
    assert flushed == []  # nor the commit's pack, which stands for its loose objects

    git(store.root, "config", "core.fsync", "added")
    with MemoryStore(store.root, agent="planner", clock=clock) as reopened:
        reopened.remember("now everything a commit adds is flushed", category="events")
    # A lock is flushed through memsite's owner record for it: the same file, named after the lock.
    names = [unquote(Path(p).name.split("+")[0]) for p in flushed]
    # The commit's objects, in their pack and its index, before their renames.
    assert any(n.startswith(".memsite-tmp-") and n.endswith(".pack") for n in names)
    assert any(n.startswith(".memsite-tmp-") and n.endswith(".idx") for n in names)
    assert "index.lock" in names  # the new index
    assert "refs/heads/main.lock" in names and "main" in names and "HEAD" in names  # the ref and its reflogs
    assert_clean(store.root)


@pytest.mark.parametrize(("value", "components"), [
    ("", {"pack", "pack-metadata", "commit-graph"}),
    ("none", set()),
    ("committed", {"loose-object", "pack", "reference", "pack-metadata", "commit-graph"}),
    ("loose-object,none", {"loose-object"}),
    ("reference,-reference", {"reference", "pack", "pack-metadata", "commit-graph"}),
    ("-pack", {"commit-graph"}),  # a prefix: '-pack' also drops pack-metadata, as git's strncmp does
])
def test_core_fsync_values_read_as_git_reads_them(value: str, components: set[str]) -> None:
    assert parse_fsync(value) == components


def test_core_fsync_object_files_flushes_loose_objects(store: MemoryStore) -> None:
    git(store.root, "config", "core.fsyncObjectFiles", "true")
    settings = GitSettings.read(storage_of(store).repo.git.config())
    assert settings.flush("loose-object") is not None and settings.flush("reference") is None


@pytest.mark.parametrize("setting", [None, "9"])
def test_objects_are_compressed_as_git_is_told(tmp_path: Path, clock: Clock, setting: str | None) -> None:
    """A memory clone stores loose objects (core.looseCompression=0, set unless the user chose a level);
    a level the user chose is the one memsite's own objects get too."""
    root = tmp_path / "memory"
    MemoryStore.init(root, agent="planner", clock=clock).close()
    if setting is not None:
        git(root, "config", "core.compression", setting)
        git(root, "config", "--unset", "core.looseCompression")
    text = "the same words again and again " * 80
    with MemoryStore(root, agent="planner", clock=clock) as store:
        memory = store.remember(text)
    sha = git(root, "rev-parse", f"HEAD:{Path(memory.path).relative_to(root).as_posix()}").strip()
    size = int(subprocess.run(["git", "cat-file", "--batch-check=%(objectsize:disk)"], cwd=root, input=sha,
                              capture_output=True, text=True, check=True).stdout)  # as stored: in the commit's pack
    assert (size > len(text)) == (setting is None)
    assert text.strip() in git(root, "cat-file", "-p", sha)
    assert_clean(root)


def test_a_reused_object_is_freshened_so_gc_does_not_prune_it(store: MemoryStore) -> None:
    """Regression: a loose object written again was left with its old time; 'git gc' running
    between that write and the branch move could prune it as old and unreachable."""
    root = store.root
    data = b"the same bytes written long ago and again now\n"
    sha = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=data, capture_output=True,
                         check=True).stdout.decode().strip()
    path = root / ".git" / "objects" / sha[:2] / sha[2:]
    month_ago = time.time() - 30 * 86400
    os.utime(path, (month_ago, month_ago))
    assert storage_of(store).repo.objects.write(b"blob", data).hex() == sha
    assert path.stat().st_mtime > time.time() - 60
    git(root, "prune", "--expire=2.weeks.ago")  # gc, between the object write and the commit pointing at it
    assert git(root, "cat-file", "-p", sha).encode() == data



def loose_objects(root: Path) -> int:
    return int(dict(line.split(": ") for line in git(root, "count-objects", "-v").splitlines())["count"])


def pack_names(root: Path) -> set[str]:
    return {path.stem for path in (root / ".git" / "objects" / "pack").glob("*.idx")}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files through /proc")
def test_a_process_opening_and_closing_stores_keeps_no_file_open(store: MemoryStore, clock: Clock) -> None:
    def open_files() -> list[str]:
        return sorted(os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                      if os.path.exists(f"/proc/self/fd/{fd}"))

    root = store.root
    store.close()
    gc.collect()  # (files of stores an earlier test left to the garbage collector: not this test's to count)
    before = open_files()
    for i in range(5):  # writes, merges of packs, and a close each time
        with MemoryStore(root, agent="planner", clock=clock) as again:
            again.remember(f"memory {i} written by a short-lived store", category="events")
            storage_of(again).repo.objects.maintenance.merge_own_packs()
    assert open_files() == before


def test_a_write_stores_its_objects_in_one_pack_that_git_reads(store: MemoryStore, clock: Clock) -> None:
    root = store.root
    before, loose = pack_names(root), loose_objects(root)
    memory = store.remember("the canary stage runs for ten minutes before the rollout", category="events")
    [added] = pack_names(root) - before  # the blob, six folders and the commit: one pack, no loose file
    assert loose_objects(root) == loose
    assert f"{added} 8" in (root / ".git" / "memsite-packs").read_text()
    shown = git(root, "verify-pack", "-v", str(root / ".git" / "objects" / "pack" / f"{added}.idx"))
    assert "commit" in shown and "blob" in shown and "delta" not in shown.split("non delta")[0]
    rel = Path(memory.path).relative_to(root).as_posix()
    assert "ten minutes" in git(root, "show", f"HEAD:{rel}")
    # Another process reads it back from the pack, and builds on it.
    with MemoryStore(root, agent="reviewer", clock=clock) as other:
        assert other.get(memory.id).content == memory.content
        other.remember("a second writer builds on the first one's pack", category="events")
    assert_clean(root)


def test_a_commits_pack_is_kept_from_git_repacks_until_its_branch_moves(store: MemoryStore,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A 'git gc' that lists the packs, then walks the refs just before a write's branch moves, would remove
    the write's pack with objects it did not see reachable: until the branch moves the pack has a .keep file,
    which git's repack honours (as for a pack 'git receive-pack' takes in), and then none."""
    root = store.root
    pack_dir = root / ".git" / "objects" / "pack"
    seen: list[set[str]] = []
    update = storage_of(store).repo.refs.update

    def repack_now(*args: object, **kwargs: object) -> None:  # a 'git gc' right before the branch moves
        seen.append({p.stem for p in pack_dir.glob("*.keep")})
        git(root, "repack", "-a", "-d", "-q")
        update(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage_of(store).repo.refs, "update", repack_now)
    memory = store.remember("the release train leaves every tuesday", category="events")
    assert len(seen) == 1 and len(seen[0]) == 1  # the commit's pack was kept while the repack ran
    assert not list(pack_dir.glob("*.keep"))  # and released once the branch moved
    rel = Path(memory.path).relative_to(root).as_posix()
    assert "tuesday" in git(root, "show", f"HEAD:{rel}")
    assert_clean(root)


def test_objects_git_stored_as_deltas_are_read_through_git(store: MemoryStore, clock: Clock) -> None:
    """memsite reads whole objects itself; deltas (git gc stores alike texts as deltas) go through git cat-file."""
    shared = "The runbook says: drain the node, wait for the pods to move, then restart the kubelet. " * 8
    made = [store.remember(f"Step {i}. {shared}", category="cases", dedupe=False) for i in range(12)]
    git(store.root, "gc", "-q", "--aggressive")
    packs = (store.root / ".git" / "objects" / "pack").glob("*.idx")
    assert any("chain length" in git(store.root, "verify-pack", "-v", str(idx)) for idx in packs)
    with MemoryStore(store.root, agent="reader", clock=clock) as reader:
        assert reader.rebuild_index() == 12  # every file read back, the deltas among them
        assert {m.id for m in reader.list()} == {m.id for m in made}


def test_memsite_merges_the_packs_it_wrote_and_leaves_the_others_alone(store: MemoryStore, clock: Clock) -> None:
    root = store.root
    (root / "NOTES.txt").write_text("a person's own file\n")
    git(root, "add", "NOTES.txt")
    git(root, "commit", "-q", "-m", "A note by hand")
    git(root, "repack", "-d", "-q")  # a pack git wrote: memsite never lists, merges or removes it
    def listed_packs() -> list[str]:
        return [line for line in (root / ".git" / "memsite-packs").read_text().splitlines() if line.startswith("pack-")]

    theirs = pack_names(root) - {line.split()[0] for line in listed_packs()}
    assert theirs
    made = [store.remember(f"memory number {i} about pack number {i * 7}", category="events") for i in range(80)]
    listed = listed_packs()
    assert len(listed) < 24 and theirs <= pack_names(root)
    # Every pack memsite wrote is listed; merged ones are gone.
    assert len(pack_names(root)) == len(listed) + len(theirs)
    sizes = sorted(int(line.split()[1]) for line in listed)
    assert max(sizes) > 7  # merged: more than one write's objects in a pack
    assert int(dict(line.split(": ") for line in git(root, "count-objects", "-v").splitlines())["packs"]) < 50
    with MemoryStore(root, agent="reviewer", clock=clock) as other:  # read back from the merged packs
        assert [other.get(m.id).content for m in made] == [m.content for m in made]
    git(root, "gc", "-q")  # a person's gc removes memsite's packs too: the next write copes
    store.remember("written after a gc took every pack away", category="events")
    assert len(store.list()) == 81
    assert_clean(root)





def test_git_stores_memsites_objects_with_deltas_as_they_add_up_and_kept_packs_stay(tmp_path: Path,
                                                                                   clock: Clock) -> None:
    """Merged packs copy whole objects; past gc.auto objects git's own repack stores them with deltas."""
    root = tmp_path / "memory"
    MemoryStore.init(root, agent="planner", clock=clock).close()
    git(root, "config", "gc.auto", "150")  # git's threshold, made small
    with MemoryStore(root, agent="planner", clock=clock) as store:
        store.remember("a pack a person keeps", category="events")
        kept = max((root / ".git" / "objects" / "pack").glob("*.idx"), key=lambda p: p.stat().st_mtime_ns).stem
        (root / ".git" / "objects" / "pack" / f"{kept}.keep").write_text("")
        priorities = set()
        for i in range(60):
            store.remember(f"note {i}: the canary for service {i} " + "and its long shared runbook text " * 20,
                           category="events")
            job = storage_of(store).repo.objects.maintenance.delta_process
            if job is not None and hasattr(os, "getpriority"):
                with contextlib.suppress(ProcessLookupError):  # (reaped already)
                    priorities.add(os.getpriority(os.PRIO_PROCESS, job.pid))
        assert len(store.list()) == 61
        assert priorities == {19} or not hasattr(os, "getpriority")  # git works on the time writers leave
        # git's pack with deltas, started in the background past gc.auto objects, is taken in by the
        # next merge or, at the latest, when the store closes
    assert (root / ".git" / "objects" / "pack" / f"{kept}.pack").exists()
    made = [line.split()[0] for line in (root / ".git" / "memsite-packs").read_text().splitlines()
            if line.endswith(" deltas")]
    shown = [git(root, "verify-pack", "-v", str(root / ".git" / "objects" / "pack" / f"{name}.idx")) for name in made]
    assert any("chain length" in text for text in shown)  # objects stored as deltas
    whole = sum(int(line.split()[1]) for line in (root / ".git" / "memsite-packs").read_text().splitlines()
                if line.startswith("pack-") and not line.endswith(" deltas"))
    assert whole < 350  # of about 490: most of memsite's objects left its whole-object packs for git's
    assert_clean(root)


def test_git_stores_each_folder_as_a_delta_of_its_earlier_versions(store: MemoryStore) -> None:
    """Each write rewrites its folders, each with one file more, stored whole (large ones uncompressed), and
    merging memsite's packs puts the versions of a folder side by side in one pack. Reusing what a pack
    holds, git takes whole objects side by side for objects it found no delta between before, and it finds a
    tree's earlier versions by the folder it is for: told to look again, and which folder each tree is for,
    it stores each version as a delta of another."""
    objects = storage_of(store).repo.objects.maintenance
    objects.merge_at = 10_000  # merged below, all at once
    # (61 packs unmerged: the 'git gc --auto' that memsite starts after one commit in 256 would repack them
    # all, and nothing is merged while it runs: the test failed so now and then)
    git(store.root, "config", "gc.autoPackLimit", "1000")
    with store.transaction("A folder of 300") as tx:
        for i in range(300):
            tx.remember(f"event {i}: deploy {i * 7} of service {i % 13}", category="events", dedupe=False)
    for i in range(60):  # agents writing to every category in turn
        store.remember(f"note {i}: service {i * 7} restarts at {i}:00 on node {i % 13}",
                       category=DEFAULT_CATEGORIES[i % len(DEFAULT_CATEGORIES)].name)
    objects.merge_own_packs()
    assert len(listed_packs(store.root)) == 1  # every version of every folder in one pack
    objects.delta_after = 100  # (gc.auto) git's threshold, made small: the next merge starts git
    objects.merge_own_packs()
    objects.wait_for_deltas(600)  # (git runs at the lowest priority: on a busy machine it waits its turn)
    objects.merge_own_packs()  # takes git's pack in
    made = [line.split()[0] for line in (store.root / ".git" / "memsite-packs").read_text().splitlines()
            if line.endswith(" deltas")]
    shown = git(store.root, "verify-pack", "-v", str(store.root / ".git" / "objects" / "pack" / f"{made[0]}.idx"))
    trees = "".join(line.split()[0] + "\n" for line in shown.splitlines() if line.split()[1:2] == ["tree"])
    sizes = subprocess.run(["git", "cat-file", "--batch-check=%(objectsize) %(objectsize:disk)"], cwd=store.root,
                           input=trees, capture_output=True, text=True, check=True).stdout.split()
    large = [(int(size), int(disk)) for size, disk in zip(sizes[0::2], sizes[1::2]) if int(size) > 16384]
    assert len(large) >= 9  # the folder of 300 and each version written since
    assert sum(disk for _, disk in large) < sum(size for size, _ in large) / 5  # whole: as much as their size
    # content/memories (a line per category) is rewritten by every commit: given to git in the order written,
    # each version is a delta of the one before (given in id order, its neighbours were versions apart: whole)
    commits = git(store.root, "rev-list", "HEAD").split()
    versions = set(subprocess.run(["git", "cat-file", "--batch-check=%(objectname)"], cwd=store.root, check=True,
                                  input="".join(f"{commit}:content/memories\n" for commit in commits),
                                  capture_output=True, text=True).stdout.split())
    deltas = {line.split()[0] for line in shown.splitlines() if len(line.split()) >= 7}
    assert len(versions) >= 60
    assert len(versions & deltas) >= len(versions) * 3 // 4
    assert_clean(store.root)


def list_packs_with_deltas(root: Path, count: int) -> list[str]:
    """What ``count`` of git's runs storing memsite's objects with deltas leave listed: the blobs they hold."""
    blobs = []
    for i in range(count):
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=f"object {i}\n",
                              capture_output=True, text=True, check=True).stdout
        made = subprocess.run(["git", "pack-objects", "-q", ".git/objects/pack/pack"], cwd=root, input=blob,
                              capture_output=True, text=True, check=True).stdout.strip()
        with open(root / ".git" / "memsite-packs", "a") as listed:
            listed.write(f"pack-{made} 0 deltas\n")
        blobs.append(blob.strip())
    git(root, "prune-packed")
    return blobs


def blobs_found(root: Path, blobs: list[str]) -> int:
    """How many of ``blobs`` the repository holds."""
    return subprocess.run(["git", "cat-file", "--batch-check"], cwd=root, input="".join(f"{blob}\n" for blob in blobs),
                          capture_output=True, text=True, check=True).stdout.count(" blob ")


def test_packs_git_stored_with_deltas_do_not_make_every_write_merge(store: MemoryStore,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """memsite never merges git's packs with deltas itself. Once there were as many of them as packs to merge
    at, every write merged its own pack (fsyncs and a new file each)."""
    root = store.root
    # (git's own 'gc --auto', which memsite runs now and then, would repack them once 50 packs add up: not now)
    git(root, "config", "gc.autoPackLimit", "1000")
    blobs = list_packs_with_deltas(root, 30)
    objects = storage_of(store).repo.objects.maintenance
    merges = []
    merge = objects._merge
    monkeypatch.setattr(objects, "_merge", lambda: (merges.append(1), merge()))
    for i in range(60):
        store.remember(f"note {i}: service {i * 7} restarts at {i}:00 on node {i % 13}", category="events")
    assert len(merges) <= 4  # about one in 24 writes (the first learns what the list holds)
    assert len(store.list()) == 60
    assert blobs_found(root, blobs) == 30
    assert_clean(root)


def test_git_folds_its_packs_with_deltas_so_no_git_gc_repacks_everything(store: MemoryStore) -> None:
    """Each of git's runs storing memsite's objects with deltas leaves a pack (120 in 100,000 writes). Left
    listed, they reached the 50 packs at which 'git gc --auto' repacks the whole store, for many seconds while
    agents write, which then ended writing gc.log. Once eight add up, git folds them into one, geometrically;
    nothing is lost, and a pack of git's own stays."""
    root = store.root
    # (the 'git gc --auto' memsite starts after one commit in 256 would repack everything while the 30 are
    # listed beside memsite's small packs, over 50: kept out of this, as the packs left are counted below)
    git(root, "config", "gc.autoPackLimit", "1000")
    theirs = subprocess.run(["git", "pack-objects", "-q", ".git/objects/pack/pack"], cwd=root, check=True,
                            input=git(root, "rev-parse", "HEAD"), capture_output=True, text=True).stdout.strip()
    blobs = list_packs_with_deltas(root, 30)
    objects = storage_of(store).repo.objects.maintenance
    for i in range(30):
        store.remember(f"note {i}: service {i * 7} restarts at {i}:00 on node {i % 13}", category="events")
        objects.wait_for_deltas(600)  # (git runs at the lowest priority: on a busy machine it waits its turn)
    objects.merge_own_packs()  # takes git's last fold in
    listed = (root / ".git" / "memsite-packs").read_text()
    assert listed.count(" deltas") < 8
    assert len(list((root / ".git" / "objects" / "pack").glob("*.pack"))) < 15
    assert (root / ".git" / "objects" / "pack" / f"pack-{theirs}.pack").exists()
    assert blobs_found(root, blobs) == 30
    assert len(store.list()) == 30
    assert not (root / ".git" / "gc.log").exists()
    assert_clean(root)


@pytest.mark.slow
def test_packs_another_process_is_folding_are_left_to_it_until_it_has_ended(store: MemoryStore) -> None:
    """A process folding git's packs with deltas marks them on the list: another one leaves them alone while
    it runs (two folds would each make a copy), and folds them once it has ended without finishing."""
    root = store.root
    git(root, "config", "gc.autoPackLimit", "1000")  # (as above)
    list_packs_with_deltas(root, 10)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        tag = f"{other.pid}+-+{socket.gethostname()}"
        listed = root / ".git" / "memsite-packs"
        listed.write_text(listed.read_text().replace(" 0 deltas\n", f" 0 deltas {tag}\n"))
        objects = storage_of(store).repo.objects.maintenance
        for i in range(30):
            store.remember(f"note {i}: service {i * 7} restarts at {i}:00 on node {i % 13}", category="events")
            objects.wait_for_deltas(600)
        assert listed.read_text().count(f" 0 deltas {tag}\n") == 10
    finally:
        other.kill()
        other.wait()
    for i in range(30):
        store.remember(f"note {i + 30}: service {i} restarts at {i}:00 on node {i % 11}", category="events")
        objects.wait_for_deltas(600)
    objects.merge_own_packs()
    assert listed.read_text().count(" deltas") == 1
    assert_clean(root)


def test_memsite_writes_loose_objects_and_removes_no_pack_while_a_git_gc_runs(store: MemoryStore) -> None:
    """A repack lists the packs as it starts: one merged away meanwhile failed it ('cannot open pack index'),
    and git then ran no automatic gc for a day; and gc takes an index it lists before its pack (written
    meanwhile) for garbage and removes it. While gc.pid names a running process, memsite merges nothing and
    writes its objects loose, as git's own commands do. Once the gc has ended, memsite packs the loose
    objects it wrote (thousands of them, uncompressed, when a gc of a large store ran beside busy writers:
    the gc then warned of too many loose objects and ran no automatic gc for a day); others' stay."""
    root = store.root
    objects = storage_of(store).repo.objects.maintenance
    objects.merge_at = 2  # a merge is due at every write
    gc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # stands for a detached 'git gc'
    try:
        (root / ".git" / "gc.pid").write_text(f"{gc.pid} {socket.gethostname()}")
        before, loose = pack_names(root), loose_objects(root)
        for i in range(6):
            store.remember(f"note {i} written while git gc runs", category="events")
        theirs = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=root, input=b"a person's blob\n",
                                capture_output=True, check=True).stdout.decode().strip()
        assert pack_names(root) == before  # none removed, none added
        assert loose_objects(root) >= loose + 6 * 3 + 1  # each write's blob, folders and commit
    finally:
        gc.kill()
        gc.wait()
    store.remember("the gc is over", category="events")  # its gc.pid, left behind, names no running process
    assert not before <= pack_names(root)  # merged now
    assert loose_objects(root) == loose + 1  # memsite's are packed; the person's blob is git's to pack
    assert (root / ".git" / "objects" / theirs[:2] / theirs[2:]).exists()
    assert not (root / ".git" / "memsite-loose").exists()
    assert len(store.list()) == 7
    (root / ".git" / "gc.pid").unlink()
    assert_clean(root)


def test_another_process_writes_while_memsite_merges_its_packs_and_its_pack_stays_listed(
        store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsite.git import maintenance

    root = store.root
    for i in range(4):
        store.remember(f"memory {i} written before the merge", category="events")
    copy, during = maintenance.whole_entries, {}

    def copy_while_another_process_writes(folder: str, name: str) -> list:
        if not during:  # the merge holds no lock a writer needs: a writer in another process lands meanwhile
            writer = start_writer(root, "other", 2)
            out, err = writer.communicate(timeout=60)
            assert writer.returncode == 0, err
            during.update(acknowledged(out))
        return copy(folder, name)

    monkeypatch.setattr(maintenance, "whole_entries", copy_while_another_process_writes)
    listed_before = pack_names(root)
    # This write's merge is due: it runs once its lock is free.
    monkeypatch.setattr(storage_of(store).repo.objects.maintenance, "merge_at", 1)
    store.remember("the write after which the merge runs", category="events")
    assert len(during) == 2
    listed = listed_packs(root)
    assert listed == pack_names(root)  # the writer's packs are listed beside the merged one: none left to git
    assert len(listed_before - listed) >= 2  # merged and removed
    assert {m.id for m in store.list()} >= set(during) and len(store.list()) == 7
    assert_clean(root)


def test_a_failed_merge_of_packs_never_fails_a_write(store: MemoryStore, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    from memsite.git.maintenance import PackMaintenance

    def full_disk(self: PackMaintenance) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PackMaintenance, "merge_own_packs", full_disk)
    topics = ("cache deploy canary rollback schema index queue retry quota shard token backup alert audit billing"
              .split())
    made = [store.remember(f"the {a} notes mention the {b} owner", category="events")
            for a in topics[:6] for b in topics[6:11]]
    assert all(m.commit for m in made) and len(store.list()) == 30
    assert "merging memsite's packs failed" in caplog.text
    assert_clean(store.root)

@pytest.mark.slow
def test_every_object_reads_back_as_git_reads_it_from_memsite_packs_and_git_packs(store: MemoryStore,
                                                                                  clock: Clock) -> None:
    root = store.root
    for i in range(30):
        store.remember(f"memory {i}: " + "a longer body that git will store as a delta. " * (i % 5 + 1),
                       category="events")

    def check() -> None:
        listing = git(root, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
        with MemoryStore(root, agent="reader", clock=clock) as fresh:  # nothing cached: every read from disk
            for line in listing.splitlines():
                sha, kind = line.split()
                expected = subprocess.run(["git", "cat-file", kind, sha], cwd=root, capture_output=True,
                                          check=True).stdout
                assert storage_of(fresh).repo.objects.read(bytes.fromhex(sha)) == (kind, expected), sha

    check()  # from memsite's packs
    git(root, "gc", "-q", "--aggressive")  # one pack of git's, most objects stored as deltas
    check()

def test_with_git_maintenance_off_a_write_leaves_loose_objects_as_git_does(store: MemoryStore, clock: Clock) -> None:
    """gc.auto=0: nobody merges packs, and a pack a write would hurt git; loose objects it is."""
    root = store.root
    git(root, "config", "gc.auto", "0")
    before, loose = pack_names(root), loose_objects(root)
    with MemoryStore(root, agent="planner", clock=clock) as reopened:
        reopened.remember("maintenance is someone else's job here", category="events")
    assert pack_names(root) == before
    assert loose_objects(root) == loose + 8
    assert_clean(root)

def test_two_stores_written_in_turn_keep_their_shared_index_caches(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: one process writing to two stores in turn re-read each shared index on every
    write (91-95 ms a write at 100,000 memories)."""
    stores = [MemoryStore.init(tmp_path / name, agent="planner", clock=clock) for name in ("a", "b")]
    try:
        for i, store in enumerate(stores):
            store.remember(f"warm-up write to store {i}", category="events")
        reads: list[str] = []
        read = gitindex._read

        def counting(path: Path) -> object:
            reads.append(path.name)
            return read(path)

        started: list[object] = []
        monkeypatch.setattr(gitindex, "_read", counting)
        monkeypatch.setattr(IndexUpdate, "_start", lambda update, resplit: started.append(update))
        for round_ in range(3):
            for i, store in enumerate(stores):
                store.remember(f"write {round_} to store {i}", category="events", dedupe=False)
        assert started == []  # every write took the in-process fast path, without 'git update-index'
        assert reads == []  # each store's next write starts from the index it wrote itself
    finally:
        for store in stores:
            store.close()
    for store in stores:
        assert_clean(store.root)


@pytest.mark.parametrize("value", [0, -1, "ten", True])
def test_a_bad_lock_timeout_is_reported_by_name(value: object) -> None:
    from memsite.foundation.config import parse_config
    from memsite.foundation.errors import ConfigError

    with pytest.raises(ConfigError, match=r"Config value 'plugins\.memsite\.lock_timeout': expected a number > 0"):
        parse_config({"lock_timeout": value})
    assert parse_config({"lock_timeout": 2.5}).lock_timeout == 2.5


def _folds_counted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The ``git update-index`` runs from now on, as whether each folds the delta into a new base."""
    folds: list[bool] = []
    start = IndexUpdate._start

    def spy(update: IndexUpdate, resplit: bool) -> object:
        folds.append(resplit)
        return start(update, resplit)

    monkeypatch.setattr(IndexUpdate, "_start", spy)
    return folds


def _shared_base(root: Path) -> bytes | None:
    """The id of the shared index the split index at ``root`` names."""
    return gitindex._link(gitindex._read(root / ".git" / "index")[2])


def test_the_index_stays_right_across_folds_and_a_person_staging_files_between_writes(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delta index a write leaves is reused by the next write of the process; it must never hide
    what git wrote meanwhile, and folding the delta into a new base (a resplit) must keep every entry."""
    monkeypatch.setattr(gitindex, "MAX_DELTA_ENTRIES", 3)
    folds = _folds_counted(monkeypatch)
    for i in range(15):
        store.remember(f"memory number {i} about the index", category="events", dedupe=False)
        assert_clean(store.root)
        if i % 5 == 2:  # a person stages and commits a file of their own: git replaces the index
            (store.root / f"note-{i}.md").write_text(f"a note {i}\n")
            git(store.root, "add", f"note-{i}.md")
            git(store.root, "commit", "-qm", f"a note {i}")
    tracked = git(store.root, "ls-files").splitlines()
    assert len([p for p in tracked if p.startswith("content/memories/events/")]) == 15
    assert len([p for p in tracked if p.startswith("note-")]) == 3
    # Regression: a fold keeps racily-clean entries in the delta; counting them folded again on every write.
    assert 1 <= folds.count(True) <= 4, folds


def test_memories_changed_superseded_and_forgotten_go_into_the_index_without_git_beside_a_persons_commit(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite or removal of a file already in the index (in the shared base or in the delta) is written into
    the delta as git would write it: no ``git update-index`` runs (it was most of an update's time), git sees
    the index as its own, and a person's ``git commit -a`` whose hook runs meanwhile lands beside the writes."""
    root = store.root
    old = [store.remember(f"memory {i} about the ledger owner", category="events", dedupe=False) for i in range(6)]
    git(root, "update-index", "--split-index")  # (a person's git command folds the delta: the files are in the base)
    fresh = store.remember("memory 6, only in the delta", category="events", dedupe=False)
    folds = _folds_counted(monkeypatch)
    store.update(old[0].id, content="memory 0 about the ledger owner, now corrected")  # in the base
    assert_clean(root)
    store.remember("The ledger owner is now Ana.", category="events", supersedes=old[1].id, dedupe=False)
    assert_clean(root)
    store.forget(old[2].id)
    assert_clean(root)
    store.update(fresh.id, content="memory 6, changed in the delta")
    store.forget(fresh.id)
    store.update(old[0].id, content="memory 0, corrected twice")  # its replacing entry replaced
    assert_clean(root)
    assert folds == []

    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\ntouch .git/hook-running\nsleep 1\n")
    hook.chmod(0o755)
    (root / "content" / "index.md").write_text("# Changed by a person\n")
    person = subprocess.Popen(["git", "commit", "-a", "-q", "-m", "A file by hand"], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not (root / ".git" / "hook-running").exists():
        assert time.monotonic() < deadline, "the hook never ran"
        time.sleep(0.01)
    store.update(old[3].id, content="memory 3, changed while a person commits")
    store.forget(old[4].id)
    _, err = person.communicate(timeout=30)
    assert person.returncode == 0, err
    assert git(root, "log", "-3", "--format=%s").splitlines()[2] == "A file by hand"
    assert git(root, "show", "HEAD:content/index.md") == "# Changed by a person\n"
    assert "memory 3, changed while a person commits" in (root / store.get(old[3].id).path).read_text()
    assert_clean(root)


def test_a_writer_takes_the_names_of_a_new_shared_index_from_the_writer_that_made_it(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers take turns: the one that folds the index into a new base leaves its names, and another
    writer's next write reads them there instead of parsing the base; a damaged list is never trusted."""
    monkeypatch.setattr(gitindex, "MAX_DELTA_ENTRIES", 3)
    folds = _folds_counted(monkeypatch)
    parsed: list[int] = []
    names = gitindex._names
    monkeypatch.setattr(gitindex, "_names", lambda data: parsed.append(len(data)) or names(data))
    for i in range(6):
        store.remember(f"memory number {i} before the fold", category="events", dedupe=False)
    assert True in folds
    monkeypatch.setattr(gitindex, "MAX_DELTA_ENTRIES", 200)  # no more folds: the writes below add to this base
    base = _shared_base(store.root)
    assert base is not None
    published = store.root / ".git" / gitindex.NAMES_FILE
    assert published.read_bytes().startswith(base.hex().encode() + b" ")
    parsed.clear()
    monkeypatch.setattr(gitindex, "_base_names", OrderedDict())  # as another process knows it: not at all
    store.remember("the first write of another writer", category="events", dedupe=False)
    assert parsed == []
    assert _shared_base(store.root) == base
    assert_clean(store.root)
    header, _, body = published.read_bytes().partition(b"\n")
    published.write_bytes(header + b"\n" + body.split(b"\x00", 1)[1])  # one name short: it would lie
    monkeypatch.setattr(gitindex, "_base_names", OrderedDict())
    store.remember("the first write of a third writer", category="events", dedupe=False)
    assert len(parsed) == 1 and _shared_base(store.root) == base  # the base itself was read
    assert len([p for p in git(store.root, "ls-files").splitlines() if "/events/" in p]) == 8
    assert_clean(store.root)


def test_a_transaction_adds_its_new_files_to_the_index_itself_and_a_later_single_write_folds_them(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of new files goes into the split index's delta without a git process while the delta stays
    within git's own share of the base; the next single write folds the large delta into a new base."""
    monkeypatch.setattr(gitindex, "MAX_DELTA_ENTRIES", 20)
    with store.transaction("seed") as tx:  # 200 files: past any share of a base of a few files, so git folds
        for i in range(200):
            tx.remember(f"seeded memory {i} about the index", category="events", dedupe=False)
    folds = _folds_counted(monkeypatch)
    base = _shared_base(store.root)
    with store.transaction("batch") as tx:
        made = [tx.remember(f"batched memory {i} about the index", category="events", dedupe=False) for i in range(30)]
    assert folds == []  # written by memsite: no git process
    assert _shared_base(store.root) == base
    assert_clean(store.root)
    tracked = set(git(store.root, "ls-files").splitlines())
    assert {str(Path(m.path).relative_to(store.root)) for m in made} <= tracked  # type: ignore[arg-type]
    store.remember("a single memory after the batch", category="events")
    assert folds == [True]  # its delta of 31 entries is past 20: folded into a new base
    assert _shared_base(store.root) != base
    assert len([p for p in git(store.root, "ls-files").splitlines() if "/events/" in p]) == 231
    assert_clean(store.root)


def test_git_variables_a_hook_passes_on_point_no_command_at_another_repository(
        tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook of another repository's linked worktree runs memsite on this one: git gave it GIT_DIR (and
    GIT_INDEX_FILE). memsite's git commands (git log for the site's history, 'git gc', 'git cat-file')
    still work on this repository, and leave that one alone: its history never reaches this site."""
    project = tmp_path / "project"
    git(tmp_path, "init", "-q", str(project))
    (project / "work.txt").write_text("a person's work\n")
    git(project, "add", "work.txt")
    git(project, "commit", "-qm", "Work")
    before = (git(project, "rev-parse", "HEAD"), git(project, "count-objects", "-v"),
              (project / ".git" / "index").read_bytes())
    MemoryStore.init(tmp_path / "memory", agent="planner", clock=clock).close()
    for name, value in (("GIT_DIR", project / ".git"), ("GIT_WORK_TREE", project),
                        ("GIT_INDEX_FILE", project / ".git" / "index"),
                        ("GIT_OBJECT_DIRECTORY", project / ".git" / "objects")):
        monkeypatch.setenv(name, str(value))
    with MemoryStore(tmp_path / "memory", agent="planner", clock=clock) as store:
        store.remember("written from another repository's hook", category="events")
        with store.transaction("A large import") as tx:  # 'git update-index' updates the index
            for n in range(100):
                tx.remember(f"Imported memory number {n} about the billing queue", category="cases", dedupe=False)
        assert store.rebuild_index() == 101
        assert store.get(store.list(category="events")[0].id).abstract == "written from another repository's hook"
        subjects = [commit.subject for commit in history.read(store.root)]  # what the site's history shows
        assert "Work" not in subjects and "Remember events: written from another repository's hook" in subjects
        # (Its 'git gc --auto' when the commit is sampled.)
        storage_of(store).repo.maintain(storage_of(store).repo.refs.head_commit())
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(name)
    assert_clean(tmp_path / "memory")
    assert (git(project, "rev-parse", "HEAD"), git(project, "count-objects", "-v"),
            (project / ".git" / "index").read_bytes()) == before
