"""memsite.git.worktree: the index memsite puts in ``index.lock`` and the working tree it writes are what git
expects after the same change, and a write's journal and files written ahead come back as they were left."""

from __future__ import annotations

import os
import re
from pathlib import Path

from memsite.git.locks import Locks
from memsite.git.worktree import TMP_SUFFIX, FilesAhead, IndexUpdate, Journal, atomic_write, restore

from .conftest import commit_files, fsck, run, text


def index_stats(repo: Path) -> dict[str, tuple[int, int, int]]:
    """path -> (mtime ns, inode, size) of each index entry, as ``git ls-files --debug`` reads them."""
    found, path = {}, ""
    for line in text(repo, "ls-files", "--debug").splitlines():
        if not line.startswith("  "):
            path = line
        elif line.strip().startswith("mtime:"):
            seconds, nanos = line.split()[1].split(":")
            found[path] = [int(seconds) * 1_000_000_000 + int(nanos)]
        elif "ino:" in line:
            found[path].append(int(re.search(r"ino: (\d+)", line)[1]))  # type: ignore[index]
        elif "size:" in line:
            found[path].append(int(re.search(r"size: (\d+)", line)[1]))  # type: ignore[index]
    return {p: tuple(v) for p, v in found.items()}  # type: ignore[misc]


def test_an_index_update_stages_changed_removed_and_new_files_as_git_add_would(repo: Path) -> None:
    commit_files(repo, {"a/one.md": b"1\n", "a/two.md": b"2\n", "b/three.md": b"3\n"})
    atomic_write(repo / "a" / "one.md", b"one, edited\n")
    (repo / "b" / "three.md").unlink()
    (repo / "b").rmdir()
    atomic_write(repo / "c" / "four.md", b"4\n")  # (its folder made too)
    git_dir = repo / ".git"
    lock = Locks(git_dir, repo).acquire(git_dir / "index")
    try:
        IndexUpdate(repo, git_dir, lock, ["a/one.md", "b/three.md", "c/four.md"]).wait()
        assert text(repo, "diff", "--cached", "--name-status") == ""  # the live index is untouched until commit
        lock.commit()
    finally:
        lock.rollback()
    assert text(repo, "diff", "--cached", "--name-status").splitlines() == ["M\ta/one.md", "D\tb/three.md",
                                                                           "A\tc/four.md"]
    assert text(repo, "diff", "--name-only") == ""  # the working tree is what was staged
    for rel, (mtime, ino, size) in index_stats(repo).items():  # stat data of the files as they are
        st = os.stat(repo / rel)
        assert (mtime, ino, size) == (st.st_mtime_ns, st.st_ino, st.st_size), rel
    assert not [name for name in os.listdir(git_dir) if name.startswith("memsite-index.")]  # its private copy went
    # git only hashed the files (--info-only): their blobs are the commit's to store, as memsite's pack does.
    run(repo, "hash-object", "-w", "a/one.md", "c/four.md")
    run(repo, "commit", "-q", "-m", "as staged")
    assert text(repo, "status", "--porcelain") == ""
    fsck(repo)


def test_restore_puts_the_paths_back_as_git_checkout_would(repo: Path) -> None:
    commit_files(repo, {"a/one.md": b"1\n", "a/deep/two.md": b"2\n"})
    (repo / "a" / "one.md").write_text("half of a write\n")
    (repo / "a" / "deep" / "two.md").unlink()
    (repo / "a" / "deep" / f".two.md.1234{TMP_SUFFIX}").write_text("a killed writer's temporary file\n")
    (repo / "x" / "y").mkdir(parents=True)
    (repo / "x" / "y" / "new.md").write_text("a file the write added\n")
    run(repo, "add", "x/y/new.md")
    git_dir = repo / ".git"
    lock = Locks(git_dir, repo).acquire(git_dir / "index")
    try:
        restore(repo, git_dir, lock, {"a/one.md": b"1\n", "a/deep/two.md": b"2\n", "x/y/new.md": None})
        lock.commit()
    finally:
        lock.rollback()
    assert text(repo, "status", "--porcelain", "--untracked-files=all", "--ignored") == ""
    assert not (repo / "x").exists()  # the folders it left empty go, as git checkout removes them


def test_files_written_ahead_are_placed_with_their_bytes_and_the_rest_removed(tmp_path: Path, repo: Path) -> None:
    ahead = FilesAhead(repo / ".memsite" / "ahead")
    ahead.add([("a/one.md", b"1\n"), ("a/two.md", b"2\n"), ("b/three.md", b"3\n")])
    ahead.add([("a/two.md", b"two, changed before the commit\n")])
    ahead.finish()
    assert ahead.place("a/one.md", str(repo / "a" / "one.md"), b"1\n")
    assert ahead.place("a/two.md", str(repo / "a" / "two.md"), b"two, changed before the commit\n")
    assert not ahead.place("b/three.md", str(repo / "b" / "three.md"), b"3, changed after it was sent\n")
    assert not ahead.place("c/none.md", str(repo / "c" / "none.md"), b"never sent\n")
    ahead.discard()
    assert (repo / "a" / "one.md").read_bytes() == b"1\n"
    assert (repo / "a" / "two.md").read_bytes() == b"two, changed before the commit\n"
    assert not (repo / "b").exists()
    assert os.listdir(repo / ".memsite" / "ahead") == []
    assert text(repo, "status", "--porcelain", "--untracked-files=all").splitlines() == ["?? a/one.md", "?? a/two.md"]


def test_a_journal_tells_an_interrupted_write_from_a_finished_one(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.json")
    assert journal.pending_write() == (None, [])
    journal.begin(["b.md", "a.md"], "refs/heads/main")
    assert journal.pending_write() == ("refs/heads/main", ["a.md", "b.md"])
    journal.end("refs/heads/main", {"a.md": "ab" * 20, "b.md": None})
    assert journal.pending() == [] and journal.finished() == "refs/heads/main"
    assert journal.left_behind() == ("refs/heads/main", {"a.md": "ab" * 20, "b.md": None})
    journal.begin(["c.md"])
    journal.close()
    again = Journal(tmp_path / "journal.json")  # another process, after this one was killed
    assert again.pending_write() == (None, ["c.md"]) and again.finished() is None
    # A record torn by a kill (its start overwritten, the old tail left): ignored, as nothing was touched yet.
    (tmp_path / "journal.json").write_bytes(b'["d.md"' + b'"]')
    assert Journal(tmp_path / "journal.json").pending() == []
