"""memsite.git.index: files memsite adds to, changes in and removes from a split index are what git would have
written, and the cache-tree git leaves in an index is read as git means it.

(Folds of the shared index between writers: tests/test_git_settings.py.)
"""

from __future__ import annotations

import os
import re
import stat
import time
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsite.git import blob_id
from memsite.git import index as gitindex
from memsite.git.locks import Locks

from .conftest import commit_files, fsck, run, text


def split(repo: Path) -> None:
    run(repo, "config", "core.splitIndex", "true")
    run(repo, "update-index", "--split-index")
    assert list((repo / ".git").glob("sharedindex.*"))


def add_with_memsite(repo: Path, files: dict[str, bytes | None], *, executable: bool = False) -> str:
    """Write ``files`` in the working tree (None: remove it; their blobs too, as a commit's pack would hold them),
    and update the index for them with ``update_files`` under ``index.lock``; its outcome. The lock is committed
    only if ADDED."""
    for rel, data in files.items():
        path = repo / rel
        if data is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if executable:
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        run(repo, "hash-object", "-w", "--", rel)
    git_dir = repo / ".git"
    lock = Locks(git_dir, repo).acquire(git_dir / "index")
    try:
        blobs = {rel: None if data is None else blob_id(data) for rel, data in files.items()}
        outcome = gitindex.update_files(repo, git_dir, blobs, lock)
        if outcome == gitindex.ADDED:
            lock.commit()
        else:
            assert os.fstat(lock.fd).st_size == 0  # nothing written into the lock
        return outcome
    finally:
        lock.rollback()


def add_with_git(repo: Path, files: dict[str, bytes | None]) -> None:
    """The same change, made by ``git update-index --add --remove`` (what memsite ran before)."""
    for rel, data in files.items():
        if data is None:
            (repo / rel).unlink(missing_ok=True)
        else:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes(data)
    run(repo, "update-index", "--add", "--remove", "-z", "--stdin",
        input=b"".join(rel.encode("utf-8", "surrogateescape") + b"\x00" for rel in files))


def staged(repo: Path) -> dict[str, tuple[str, str]]:
    """path -> (mode, blob id) of every stage-0 index entry, as ``git ls-files -s`` reads them."""
    out = {}
    for record in run(repo, "ls-files", "-s", "-z").split(b"\x00"):
        if record:
            info, _, path = record.partition(b"\t")
            mode, sha, stage = info.decode().split()
            assert stage == "0"
            out[path.decode("utf-8", "surrogateescape")] = (mode, sha)
    return out


def debug_stats(repo: Path) -> dict[str, dict[str, int]]:
    """The stat data git reads from each index entry (``git ls-files --debug``)."""
    found: dict[str, dict[str, int]] = {}
    current: dict[str, int] = {}
    for line in run(repo, "-c", "core.quotePath=false", "ls-files", "--debug").decode("utf-8", "surrogateescape") \
            .splitlines():
        if not line.startswith("  "):
            current = found.setdefault(line, {})
            continue
        for key, value in re.findall(r"(\w+): (\d+(?::\d+)?)", line):
            seconds, _, nanos = value.partition(":")
            current[key] = int(seconds) * 1_000_000_000 + int(nanos or 0) if key in ("ctime", "mtime") else int(seconds)
    return found


def test_new_files_memsite_adds_to_a_split_index_are_what_git_reads_with_their_stat_data(repo: Path) -> None:
    split(repo)
    files = {"content/memories/events/2026-11/000/first.md": b"---\nid: a\n---\n\nthe canary runs ten minutes\n",
             "content/memories/events/2026-11/000/second.md": b"second\n", "notes/z.md": b"z\n"}
    assert add_with_memsite(repo, files) == gitindex.ADDED
    assert staged(repo) == {"README.md": ("100644", blob_id(b"# notes\n").hex()),
                            **{rel: ("100644", blob_id(data).hex()) for rel, data in files.items()}}
    stats = debug_stats(repo)
    for rel in files:
        st_ = os.stat(repo / rel)
        assert stats[rel]["ctime"] == st_.st_ctime_ns and stats[rel]["mtime"] == st_.st_mtime_ns
        assert (stats[rel]["ino"], stats[rel]["size"], stats[rel]["uid"]) == (st_.st_ino, st_.st_size, st_.st_uid)
    # Staged and clean in the working tree; the shared index still in use; a commit of it holds them.
    assert sorted(text(repo, "status", "--porcelain").splitlines()) == sorted(f"A  {rel}" for rel in files)
    assert text(repo, "diff-files", "--name-only") == ""
    run(repo, "commit", "-q", "-m", "with memsite's index")
    assert text(repo, "status", "--porcelain") == ""
    assert set(text(repo, "ls-tree", "-r", "--name-only", "HEAD").splitlines()) == {"README.md", *files}
    fsck(repo)


def twins(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, Path]:
    """Two repositories with ``files`` committed and all in a shared index (memsite's, git's)."""
    made = []
    for name in ("ours", "theirs"):
        repo = tmp_path / name
        run(tmp_path, "init", "-q", "-b", "main", str(repo))
        commit_files(repo, files, "first")
        split(repo)
        made.append(repo)
    return made[0], made[1]


def same_index(ours: Path, theirs: Path, written: dict[str, bytes | None]) -> None:
    """The two indexes hold the same entries, git sees the same status in both, and the stat data of the files
    memsite wrote (``written``) is right to the nanosecond (git, built without USE_NSEC, compares seconds)."""
    assert staged(ours) == staged(theirs)
    assert text(ours, "status", "--porcelain", "-z") == text(theirs, "status", "--porcelain", "-z")
    assert text(ours, "write-tree") == text(theirs, "write-tree")
    assert text(ours, "diff-files", "--name-only") == ""  # no entry whose stat data sends git to the file
    stats = debug_stats(ours)
    for rel in (rel for rel, data in written.items() if data is not None):
        st_ = os.stat(ours / rel)
        assert (stats[rel]["mtime"], stats[rel]["ino"], stats[rel]["size"]) == \
            (st_.st_mtime_ns, st_.st_ino, st_.st_size), rel


def test_files_changed_and_removed_in_the_shared_index_and_the_delta_are_what_git_update_index_writes(
        tmp_path: Path) -> None:
    committed = {f"content/memories/events/2026-11/m{i:02d}.md": b"memory %d\n" % i for i in range(40)}
    ours, theirs = twins(tmp_path, committed)
    m = sorted(committed)
    steps: list[dict[str, bytes | None]] = [
        {"new/one.md": b"one\n", "new/two.md": b"two\n", "new/three.md": b"three\n"},  # into the delta
        {m[3]: b"memory 3, superseded\n"},  # a base entry replaced
        {"new/one.md": b"one, changed\n"},  # a delta entry changed
        {m[5]: None},  # a base entry deleted
        {"new/two.md": None},  # a delta entry removed
        {m[3]: b"memory 3, changed again\n"},  # a replacement replaced
        {m[7]: b"seven\n"},
        {m[7]: None},  # a replaced entry deleted (git refuses an entry both)
        {m[0]: b"first\n", m[39]: b"last\n", m[20]: None, "new/four.md": b"four\n", "gone.md": None},
        {m[1]: b"x\n", m[2]: b"y\n", m[4]: b"z\n"},  # positions one after another, among earlier ones
    ]
    for step in steps:
        assert add_with_memsite(ours, step) == gitindex.ADDED, step
        add_with_git(theirs, step)
        same_index(ours, theirs, step)
    # git reads the result as its own: a commit of it, a status after it, a fold of it, a clean fsck.
    run(ours, "commit", "-q", "-m", "after memsite's updates")
    assert text(ours, "status", "--porcelain") == ""
    assert text(ours, "diff", "--cached", "--name-only", "HEAD") == ""
    run(theirs, "commit", "-q", "-m", "after git's updates")
    assert text(ours, "rev-parse", "HEAD^{tree}") == text(theirs, "rev-parse", "HEAD^{tree}")
    run(ours, "update-index", "--split-index")
    assert text(ours, "status", "--porcelain") == ""
    fsck(ours)


_BASE = {f"m/{i // 100}/f{i:03d}.md": b"%d\n" % i for i in range(300)}  # bitmaps of several 64-bit words


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.dictionaries(st.sampled_from([*sorted(_BASE), *(f"new/{i}.md" for i in range(6))]),
                                      st.one_of(st.none(), st.binary(max_size=16)), min_size=1, max_size=5),
                      min_size=1, max_size=6))
def test_any_run_of_changes_leaves_the_index_git_would_leave(tmp_path: Path,
                                                             steps: list[dict[str, bytes | None]]) -> None:
    folder = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    ours, theirs = twins(folder, _BASE)
    for step in steps:
        outcome = add_with_memsite(ours, step)
        if outcome != gitindex.ADDED:  # (a file removed from the base coming back: git's to write)
            assert outcome == gitindex.NOT_APPLICABLE
            add_with_git(ours, step)
        add_with_git(theirs, step)
        same_index(ours, theirs, step if outcome == gitindex.ADDED else {})
    fsck(ours)


def fold_settled(repo: Path, *paths: str) -> None:
    """Fold the delta into a new shared index as the writer does (``--split-index``), once the files are a second
    old, twice: a fold keeps in the delta, as replacements, the entries of files as new as the index it read
    (racily clean); the second reads the first's newer index, and keeps none."""
    time.sleep(1.1)
    for _ in range(2):
        run(repo, "update-index", "--split-index", "--add", "--", *paths)


def test_past_its_share_of_replaced_entries_the_delta_is_left_to_git_to_fold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitindex, "MAX_REPLACED", 2)
    ours, _ = twins(tmp_path, {f"m{i}.md": b"%d\n" % i for i in range(20)})  # (20% of 20 is 4: 2 does not decide)
    fold_settled(ours)
    for i in range(4):
        assert add_with_memsite(ours, {f"m{i}.md": b"changed %d\n" % i}) == gitindex.ADDED
    index_before = (ours / ".git" / "index").read_bytes()
    assert add_with_memsite(ours, {"m4.md": b"changed 4\n"}) == gitindex.RESPLIT
    assert (ours / ".git" / "index").read_bytes() == index_before
    fold_settled(ours, "m4.md")  # what the writer then runs
    assert add_with_memsite(ours, {"m5.md": b"changed 5\n"}) == gitindex.ADDED  # a small delta again
    assert text(ours, "diff-files", "--name-only") == ""
    assert staged(ours)["m4.md"][1] == blob_id(b"changed 4\n").hex()


def test_a_file_removed_from_the_shared_index_and_written_again_is_left_to_git(tmp_path: Path) -> None:
    ours, theirs = twins(tmp_path, {"a.md": b"a\n", "b.md": b"b\n"})
    assert add_with_memsite(ours, {"a.md": None}) == gitindex.ADDED
    index_before = (ours / ".git" / "index").read_bytes()
    assert add_with_memsite(ours, {"a.md": b"back\n"}) == gitindex.NOT_APPLICABLE
    assert (ours / ".git" / "index").read_bytes() == index_before
    add_with_git(theirs, {"a.md": b"back\n"})
    add_with_git(ours, {"a.md": b"back\n"})  # what the writer then runs
    same_index(ours, theirs, {})


def test_an_index_with_an_intent_to_add_entry_keeps_it(repo: Path) -> None:
    """``git add -N`` makes a version-3 index with extended flags: memsite's entries go in beside it."""
    split(repo)
    (repo / "later.md").write_text("added later\n")
    run(repo, "add", "-N", "later.md")
    assert add_with_memsite(repo, {"memory.md": b"a memory\n"}) == gitindex.ADDED
    assert sorted(text(repo, "status", "--porcelain").splitlines()) == [" A later.md", "A  memory.md"]
    assert run(repo, "ls-files", "--debug", "later.md")  # still there, git's to commit
    fsck(repo)


@pytest.mark.parametrize("case", ["not split", "version 4", "delta full"])
def test_an_index_the_fast_path_does_not_cover_is_left_to_git_untouched(repo: Path, case: str) -> None:
    files = {"new.md": b"new\n"}
    if case != "not split":
        split(repo)
    if case == "version 4":
        run(repo, "update-index", "--index-version", "4")
    elif case == "delta full":  # (git itself keeps them all in the delta)
        run(repo, "config", "splitIndex.maxPercentChange", "100")
        commit_files(repo, {f"many/{i:03d}.md": b"%d\n" % i for i in range(gitindex.MAX_DELTA_ENTRIES + 1)})
    index_before = (repo / ".git" / "index").read_bytes()
    outcome = add_with_memsite(repo, files)
    assert outcome == (gitindex.RESPLIT if case == "delta full" else gitindex.NOT_APPLICABLE)
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert not (repo / ".git" / "index.lock").exists()


# Any name git takes in a path: control characters, spaces, other scripts, bytes that are no UTF-8.
_NAME = (st.text(st.characters(min_codepoint=1, max_codepoint=0x24FF, blacklist_characters="/",
                               blacklist_categories=("Cs",)), min_size=1, max_size=16)
         | st.binary(min_size=1, max_size=8).map(lambda raw: raw.decode("utf-8", "surrogateescape"))) \
    .filter(lambda name: name not in (".", "..") and "/" not in name and "\x00" not in name
            and "git" not in name.lower())


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.lists(_NAME, min_size=1, max_size=3).map("/".join), st.binary(max_size=64),
                             min_size=1, max_size=8),
       executable=st.booleans())
def test_new_files_of_any_name_go_into_the_index_as_git_update_index_puts_them(tmp_path: Path, files: dict[str, bytes],
                                                                               executable: bool) -> None:
    # No path may be another's folder (a file and a folder of one name), nor a differently normalized twin.
    paths = sorted(files)
    if (any(b.startswith(f"{a}/") for a, b in pairwise(paths))
            or len({p.encode("utf-8", "surrogateescape") for p in paths}) < len(paths)):
        return
    runs = len(list(tmp_path.iterdir()))
    ours, theirs = tmp_path / f"ours-{runs}", tmp_path / f"theirs-{runs}"
    for repo in (ours, theirs):
        run(tmp_path, "init", "-q", "-b", "main", str(repo))
        commit_files(repo, {"README.md": b"# notes\n"}, "first")
        split(repo)
    assert add_with_memsite(ours, files, executable=executable) == gitindex.ADDED
    for rel, data in files.items():  # the same files, added by git itself
        (theirs / rel).parent.mkdir(parents=True, exist_ok=True)
        (theirs / rel).write_bytes(data)
        if executable:
            (theirs / rel).chmod((theirs / rel).stat().st_mode | stat.S_IXUSR)
    run(theirs, "--literal-pathspecs", "add", "--", *files)  # (a name may start with pathspec magic, ":")
    assert staged(ours) == staged(theirs) and set(staged(ours)) == {"README.md", *files}
    assert text(ours, "status", "--porcelain", "-z") == text(theirs, "status", "--porcelain", "-z")
    assert text(ours, "write-tree") == text(theirs, "write-tree")


def test_the_cache_tree_git_leaves_is_read_while_valid_and_not_once_git_invalidated_it(repo: Path) -> None:
    git_dir = repo / ".git"
    commit_files(repo, {"a/one.md": b"1\n", "b/two.md": b"2\n"}, "two folders")
    assert gitindex.cached_tree(git_dir) == bytes.fromhex(text(repo, "rev-parse", "HEAD^{tree}").strip())
    (repo / "a" / "three.md").write_text("3\n")
    run(repo, "add", "a/three.md")  # git invalidates the root's cache-tree entry
    assert gitindex.cached_tree(git_dir) is None
    run(repo, "commit", "-q", "-m", "three")
    split(repo)  # in split mode the extension is in the small index file
    assert gitindex.cached_tree(git_dir) == bytes.fromhex(text(repo, "rev-parse", "HEAD^{tree}").strip())
    run(repo, "checkout", "-q", "-b", "other", "HEAD~1")
    assert gitindex.cached_tree(git_dir) == bytes.fromhex(text(repo, "rev-parse", "HEAD^{tree}").strip())
    assert add_with_memsite(repo, {"c/four.md": b"4\n"}) == gitindex.ADDED  # (memsite drops the extension)
    assert gitindex.cached_tree(git_dir) is None
    (git_dir / "index").unlink()
    assert gitindex.cached_tree(git_dir) is None
